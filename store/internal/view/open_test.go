package view

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// TestOpen: Open returns the lookup's error, looks the header up again while
// its file is not pinned, gives up with ErrCorruption after attempts
// lookups, and opens a view that reads once the file is there.
func TestOpen(t *testing.T) {
	s := store(t, false)
	var c counters
	o := Options{Verify: true, Closed: errClosed,
		Counters: Counters{BytesRead: &c.read, VerifiedBytes: &c.verified, Corruptions: &c.corrupt, Views: &c.views}}
	lookups := 0
	header := func() (*format.PacketHeader, error) { lookups++; return s.h, nil }
	gone := func(uint32) *bloblog.File { return nil }
	if _, err := Open(4, header, gone, o); !errors.Is(err, ErrCorruption) || lookups != 4 {
		t.Fatalf("file never pinned: %v after %d lookups", err, lookups)
	}
	bad := errors.New("lookup failed")
	if _, err := Open(4, func() (*format.PacketHeader, error) { return nil, bad }, gone, o); err != bad {
		t.Fatalf("lookup error: %v", err)
	}
	lookups = 0
	pins := 0
	file := func(num uint32) *bloblog.File {
		if pins++; pins < 3 || num != s.h.BlobFile {
			return nil
		}
		return bloblog.NewFile(s.fs, s.fs.PathDir(s.path), num, true, 0, slog.New(slog.DiscardHandler))
	}
	v, err := Open(4, header, file, o)
	if err != nil || lookups != 3 {
		t.Fatalf("file pinned on the third lookup: %v after %d", err, lookups)
	}
	defer v.Release()
	if b, err := v.Chunk(1); err != nil || string(b) != string(s.chunks[1]) {
		t.Fatalf("chunk 1 of the opened view: %v", err)
	}
}
