//go:build !unix

package assemble

import "time"

// cpuTime is unknown here; benchmarks then report no CPU-time figures.
func cpuTime() time.Duration { return 0 }
