//go:build !unix

package cputest

import "time"

// Used is 0: this system gives no CPU-time figure.
func Used() time.Duration { return 0 }
