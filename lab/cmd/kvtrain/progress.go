package main

import (
	"fmt"
	"github.com/kvstore/kvstore/internal/terminal"
	"io"
	"time"
)

// progress reports a long run on stderr. On a terminal it is one line
// redrawn in place (at most every redrawEvery) and erased by done;
// elsewhere (a pipe, a log file) it writes whole lines, a step at most
// every logEvery, so that a log shows the run moving without filling up.
// Stages (what the run is doing) are always shown.
type progress struct {
	w       io.Writer
	label   string
	inPlace bool
	every   time.Duration
	now     func() time.Time
	last    time.Time // when the last step was shown
	shown   bool      // a step was shown
	drawn   bool      // an in-place line is on the screen
}

// How often a step is shown: on a terminal, and in a log.
const (
	redrawEvery = 100 * time.Millisecond
	logEvery    = 10 * time.Second
)

// newProgress returns the progress of label on w, redrawn in place when
// w is a terminal.
func newProgress(w io.Writer, label string) *progress {
	p := &progress{w: w, label: label, every: logEvery, now: time.Now}
	if terminal.Is(w) {
		p.inPlace, p.every = true, redrawEvery
	}
	return p
}

// stage shows what the run is doing now.
func (p *progress) stage(msg string) { p.show(msg) }

// step shows msg unless a step was shown less than p.every ago; the first
// step is always shown.
func (p *progress) step(msg string) {
	t := p.now()
	if p.shown && t.Sub(p.last) < p.every {
		return
	}
	p.last, p.shown = t, true
	p.show(msg)
}

func (p *progress) show(msg string) {
	if !p.inPlace {
		fmt.Fprintf(p.w, "%s: %s\n", p.label, msg)
		return
	}
	p.drawn = true
	fmt.Fprintf(p.w, "\r\x1b[K%s: %s", p.label, msg)
}

// done erases an in-place line, so that what follows starts a clean line.
func (p *progress) done() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}
