package main

import (
	"fmt"
	"github.com/kvstore/kvstore/internal/terminal"
	"io"
	"time"
)

// progress draws one self-erasing status line on a terminal for long
// operations (verify, check, compact, gc, import, export). On anything
// else (a pipe, a file) it is quiet: its methods do nothing.
type progress struct {
	w     io.Writer // nil: quiet
	label string
	start time.Time
	last  time.Time
	now   func() time.Time
	drawn bool
}

// progressEvery is the least time between two redraws.
const progressEvery = 100 * time.Millisecond

// newProgress returns a progress line on e.stderr when it is a terminal.
func newProgress(e *env, label string) *progress {
	if !terminal.Is(e.stderr) {
		return &progress{}
	}
	return startProgress(e.stderr, label, time.Now)
}

func startProgress(w io.Writer, label string, now func() time.Time) *progress {
	t := now()
	return &progress{w: w, label: label, start: t, now: now}
}

// update redraws the line with done of total (units: bytes when bytes,
// else items), at most every progressEvery.
func (p *progress) update(done, total int64, bytes bool) {
	if p.w == nil {
		return
	}
	t := p.now()
	if p.drawn && t.Sub(p.last) < progressEvery {
		return
	}
	p.last, p.drawn = t, true
	fmt.Fprint(p.w, "\r\x1b[K"+renderProgress(p.label, done, total, bytes, t.Sub(p.start)))
}

// stage shows a message in place of counts.
func (p *progress) stage(msg string) {
	if p.w == nil {
		return
	}
	p.drawn = true
	fmt.Fprintf(p.w, "\r\x1b[K%s: %s", p.label, msg)
}

// done erases the line.
func (p *progress) done() {
	if p.w != nil && p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// renderProgress is the text of a progress line: label, percentage, counts
// and, for bytes, the rate so far.
func renderProgress(label string, done, total int64, bytes bool, elapsed time.Duration) string {
	pct := ""
	if total > 0 {
		pct = fmt.Sprintf(" %3d%%", min(100*done/total, 100))
	}
	if !bytes {
		return fmt.Sprintf("%s:%s %d/%d", label, pct, done, total)
	}
	s := fmt.Sprintf("%s:%s %s/%s", label, pct, humanBytes(done), humanBytes(total))
	if elapsed > 0 {
		s += fmt.Sprintf(" %s/s", humanBytes(int64(float64(done)/elapsed.Seconds())))
	}
	return s
}
