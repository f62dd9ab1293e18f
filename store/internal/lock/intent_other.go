//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package lock

import "os"

// Without open file description locks a waiting writer leaves no mark:
// it polls, and readers are not held back for it.

func markWaiting(*os.File) bool   { return false }
func unmarkWaiting(*os.File)      {}
func writerWaiting(*os.File) bool { return false }
