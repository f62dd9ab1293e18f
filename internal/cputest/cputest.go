// Package cputest measures the CPU time this process has used, for
// benchmarks that report CPU time beside wall time: on a busy machine the
// CPU time measures a benchmark's own work where wall time also measures
// its wait for a core. It is for tests and benchmarks; Used is 0 where the
// system gives no figure (not unix), and callers then report none.
package cputest
