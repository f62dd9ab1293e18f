//go:build !linux

package main

import (
	"io"
	"os"
)

// isTerminal reports whether w is a character device: a terminal, or a
// device such as /dev/null. Only Linux asks the terminal itself
// (terminal_linux.go).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
