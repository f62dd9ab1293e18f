package main

import (
	"bytes"
	"testing"
	"time"
)

// In a log, progress writes every stage and a step at most every p.every
// (the first always); on a terminal it redraws one line and done erases
// it.
func TestProgress(t *testing.T) {
	var now time.Time
	clock := func() time.Time { return now }
	for _, c := range []struct {
		name    string
		inPlace bool
		want    string
	}{
		{"log", false, "x: stage\nx: step 1\nx: step 3\n"},
		{"terminal", true, "\r\x1b[Kx: stage\r\x1b[Kx: step 1\r\x1b[Kx: step 3\r\x1b[K"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			p := &progress{w: &b, label: "x", inPlace: c.inPlace, every: time.Second, now: clock}
			p.stage("stage")
			p.step("step 1")
			now = now.Add(999 * time.Millisecond)
			p.step("step 2")
			now = now.Add(time.Millisecond)
			p.step("step 3")
			p.done()
			p.done() // nothing left to erase
			if b.String() != c.want {
				t.Fatalf("wrote %q, want %q", b.String(), c.want)
			}
		})
	}
	var b bytes.Buffer
	if p := newProgress(&b, "x"); p.inPlace || p.every != logEvery {
		t.Fatalf("a buffer is not a terminal: %+v", p)
	}
}
