package main

import (
	"fmt"
	"io"
	"os"
)

// status draws one self-erasing line naming what is being measured, on a
// terminal only; on a pipe or a file it is quiet.
type status struct {
	w     io.Writer // nil: quiet
	drawn bool
}

func newStatus(w io.Writer) *status {
	if !isTerminal(w) {
		return &status{}
	}
	return &status{w: w}
}

func (s *status) show(msg string) {
	if s.w == nil {
		return
	}
	s.drawn = true
	fmt.Fprintf(s.w, "\r\x1b[Kkvbench: %s", msg)
}

func (s *status) clear() {
	if s.w != nil && s.drawn {
		fmt.Fprint(s.w, "\r\x1b[K")
		s.drawn = false
	}
}

// isTerminal reports whether w is a character device (a terminal, or
// /dev/null, where drawing costs nothing). It needs no system call, so it
// builds everywhere.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
