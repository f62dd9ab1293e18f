package bloblog

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// TestGuardTruncatedMapping maps a blob file on the OS's file system,
// truncates it under the mapping and reads the lost bytes inside Guard:
// ErrCorruption naming the offset, not a SIGBUS; other panics pass.
func TestGuardTruncatedMapping(t *testing.T) {
	if !MmapSupported {
		t.Skip("no mmap on this platform")
	}
	dir := t.TempDir()
	body := append(format.EncodeBlobHeader(1), make([]byte, 64<<10)...)
	if err := os.WriteFile(filepath.Join(dir, FileName(1)), body, 0o644); err != nil {
		t.Fatal(err)
	}
	f := NewFile(vfs.Default, dir, 1, true, 0, slog.New(slog.DiscardHandler))
	defer f.Release()
	b, err := f.Span(format.BlobHeaderSize, 64<<10)
	if err != nil || b == nil {
		t.Fatalf("Span: %v (mapped %v)", err, b != nil)
	}
	if err := f.Guard(func() error { _ = CRC(b); return nil }); err != nil {
		t.Fatalf("Guard over an intact mapping: %v", err)
	}
	if err := os.Truncate(f.Path(), format.BlobHeaderSize); err != nil {
		t.Fatal(err)
	}
	err = f.Guard(func() error { _ = CRC(b); return nil })
	if !errors.Is(err, ErrCorruption) {
		t.Fatalf("Guard over a truncated mapping: %v, want ErrCorruption", err)
	}
	t.Log(err)
	if _, err := f.Span(format.BlobHeaderSize, 64<<10); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Span after the fault: %v, want ErrCorruption (the size was refreshed)", err)
	}
	defer func() {
		if r := recover(); r != "not a fault" {
			t.Fatalf("recovered %v, want the panic passed through", r)
		}
	}()
	_ = f.Guard(func() error { panic("not a fault") })
}
