//go:build unix

package assemble

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) this process has used: on a busy
// machine it measures a benchmark's work where wall time measures its wait.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
