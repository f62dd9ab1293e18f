package main

import (
	"fmt"
	"github.com/kvstore/kvstore/internal/terminal"
	"io"
)

// status draws one self-erasing line naming what is being measured, on a
// terminal only; on a pipe or a file it is quiet.
type status struct {
	w     io.Writer // nil: quiet
	drawn bool
}

func newStatus(w io.Writer) *status {
	if !terminal.Is(w) {
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
