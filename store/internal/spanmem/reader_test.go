package spanmem

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/crc32c"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

var (
	errTestClosed   = errors.New("test: closed")
	errTestNotFound = errors.New("test: not found")
)

// fakeRecords serves head records from a map; other, when set, makes the
// first Head answer format.ErrOtherWrite and Meta answer other (a memory
// moved by compaction, or replaced).
type fakeRecords struct {
	artifacts
	heads   map[[2]int]*format.HeadMeta
	other   *format.SpanMeta
	reads   int
	entered int
}

func (f *fakeRecords) Enter() error { f.entered++; return nil }
func (f *fakeRecords) Leave()       { f.entered-- }
func (f *fakeRecords) Meta() (*format.SpanMeta, error) {
	return f.other, nil
}
func (f *fakeRecords) Head(m *format.SpanMeta, layer, head int) (*format.HeadMeta, bool, error) {
	f.reads++
	if f.other != nil && m != f.other {
		return nil, false, format.ErrOtherWrite
	}
	h, ok := f.heads[[2]int{layer, head}]
	return h, ok, nil
}

// readerFixture is a two-layer, one-head memory over blockFile's extent:
// layer l's resident K and V at [l*2048, +1024) and [l*2048+1024, +1024).
func readerFixture(t *testing.T, rec *fakeRecords) (*Reader, []byte, *int) {
	t.Helper()
	fs, dir := vfs.NewMem(), "blobs"
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := blockFile(t, fs, dir)
	ext := make([]byte, 8192)
	for i := range ext {
		ext[i] = byte(i % 251)
	}
	m.Layers, m.KVHeads, m.HeadDim, m.CreatedUnixNs = 2, 1, 8, 7
	for l := range uint64(2) {
		k, v := l*2048, l*2048+1024
		m.Blocks = append(m.Blocks, format.ResidentBlock{KOffset: k, VOffset: v, Length: 1024,
			KCRC: crc32c.Update(0, ext[k:k+1024]), VCRC: crc32c.Update(0, ext[v:v+1024])})
	}
	f := bloblog.NewFile(fs, dir, 1, false, 0, slog.New(slog.DiscardHandler))
	var n counts
	b, err := NewBlocks("ctx", m, f, true, &n)
	if err != nil {
		t.Fatal(err)
	}
	released := 0
	r := NewReader("ctx", m, f, b, nil, rec, ReaderOptions{Closed: errTestClosed, NotFound: errTestNotFound, Released: func() { released++ }})
	return r, ext, &released
}

func TestReaderResidentAndRelease(t *testing.T) {
	r, ext, released := readerFixture(t, &fakeRecords{})
	for l := range 2 {
		k, v, err := r.Resident(l)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(k, ext[l*2048:l*2048+1024]) || !bytes.Equal(v, ext[l*2048+1024:l*2048+2048]) {
			t.Fatalf("layer %d resident rows differ", l)
		}
	}
	if _, _, err := r.Resident(2); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("layer 2 of 2: %v", err)
	}
	r.Release()
	r.Release()
	if _, _, err := r.Resident(0); !errors.Is(err, errTestClosed) {
		t.Errorf("Resident after Release: %v", err)
	}
	if *released != 1 {
		t.Errorf("Released called %d times", *released)
	}
}

func TestReaderHead(t *testing.T) {
	h := &format.HeadMeta{Layer: 1, Head: 0}
	rec := &fakeRecords{heads: map[[2]int]*format.HeadMeta{{1, 0}: h}}
	r, _, _ := readerFixture(t, rec)
	defer r.Release()
	for range 2 {
		got, err := r.Head(1, 0)
		if err != nil || got != h {
			t.Fatalf("Head(1, 0) = %v, %v", got, err)
		}
	}
	if rec.reads != 1 || rec.entered != 0 {
		t.Errorf("%d record reads (want 1: then cached), %d reads left entered", rec.reads, rec.entered)
	}
	if _, err := r.Head(0, 0); !errors.Is(err, errTestNotFound) {
		t.Errorf("absent record: %v, want the store's ErrNotFound", err)
	}

	// Moved by compaction: the same write at another place reads on.
	moved := *r.Meta()
	moved.ExtentOffset += 4096
	rec = &fakeRecords{heads: rec.heads, other: &moved}
	r2, _, _ := readerFixture(t, rec)
	defer r2.Release()
	if got, err := r2.Head(1, 0); err != nil || got != h {
		t.Fatalf("Head after a move = %v, %v", got, err)
	}
	// Replaced: another write is ErrNotFound.
	replaced := moved
	replaced.CreatedUnixNs++
	rec = &fakeRecords{heads: rec.heads, other: &replaced}
	r3, _, _ := readerFixture(t, rec)
	defer r3.Release()
	if _, err := r3.Head(1, 0); !errors.Is(err, errTestNotFound) {
		t.Fatalf("Head after a replacement = %v, want the store's ErrNotFound", err)
	}
}
