package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRenderProgress(t *testing.T) {
	for _, c := range []struct {
		done, total int64
		bytes       bool
		elapsed     time.Duration
		want        string
	}{
		{3, 12, false, time.Second, "check:  25% 3/12"},
		{0, 0, false, 0, "check: 0/0"},
		{512 << 10, 1 << 20, true, time.Second, "check:  50% 512.0 KiB/1.0 MiB 512.0 KiB/s"},
		{2 << 20, 1 << 20, true, 0, "check: 100% 2.0 MiB/1.0 MiB"},
	} {
		if got := renderProgress("check", c.done, c.total, c.bytes, c.elapsed); got != c.want {
			t.Errorf("renderProgress(%d, %d, %v) = %q, want %q", c.done, c.total, c.bytes, got, c.want)
		}
	}
}

// On a terminal the line redraws at most every progressEvery and is
// erased at the end; off a terminal nothing is written.
func TestProgressDraws(t *testing.T) {
	var w bytes.Buffer
	now := time.Unix(0, 0)
	p := startProgress(&w, "verify", func() time.Time { return now })
	p.update(1, 4, false)
	p.update(2, 4, false) // too soon: not drawn
	now = now.Add(progressEvery)
	p.update(3, 4, false)
	p.stage("writing")
	p.done()
	want := "\r\x1b[Kverify:  25% 1/4\r\x1b[Kverify:  75% 3/4\r\x1b[Kverify: writing\r\x1b[K"
	if w.String() != want {
		t.Fatalf("drew %q, want %q", w.String(), want)
	}

	var quiet bytes.Buffer
	e := &env{stdout: &quiet, stderr: &quiet}
	q := newProgress(e, "verify") // a buffer is not a terminal
	q.update(1, 2, true)
	q.stage("x")
	q.done()
	if quiet.Len() != 0 {
		t.Fatalf("progress wrote %q off a terminal", quiet.String())
	}
	if strings.Contains(w.String(), "\n") {
		t.Fatal("progress must not scroll")
	}
}
