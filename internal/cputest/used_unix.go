//go:build unix

package cputest

import (
	"syscall"
	"time"
)

// Used is the CPU time (user + system) this process has used so far, or 0
// when getrusage fails.
func Used() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
