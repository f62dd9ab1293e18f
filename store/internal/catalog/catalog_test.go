package catalog

import (
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/kvstore/kvstore/format"
)

var quiet = slog.New(slog.DiscardHandler)

func openMem(t *testing.T, fs vfs.FS, readOnly bool) (*Catalog, error) {
	t.Helper()
	return Open("/cat", &Options{FS: fs, CacheSize: 1 << 20, MemTableSize: 1 << 20, ReadOnly: readOnly, Logger: quiet})
}

// TestCatalogReadWrite: what one synced batch wrote is read back by Get,
// Has, Scan and Iterate, across a reopen, and only under its own prefix.
func TestCatalogReadWrite(t *testing.T) {
	mem := vfs.NewMem()
	if _, err := openMem(t, mem, true); err == nil {
		t.Fatal("a read-only open created a catalog")
	}
	c, err := openMem(t, mem, false)
	if err != nil {
		t.Fatal(err)
	}
	b := c.DB.NewBatch()
	for _, ns := range []string{"a", "ab", "b"} {
		_ = b.Set(HeaderKey(ns, format.PacketID{1}), []byte(ns), nil)
		_ = b.Set(HeaderKey(ns, format.PacketID{2}), []byte(ns+"2"), nil)
	}
	_ = b.Set(KeyNextBlob, format.EncodeSequence(9), nil)
	if err := c.Commit(b); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err = openMem(t, mem, true); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got string
	if ok, err := c.Get(HeaderKey("ab", format.PacketID{2}), func(v []byte) error { got = string(v); return nil }); !ok || err != nil || got != "ab2" {
		t.Fatalf("get: %v %v %q", ok, err, got)
	}
	if ok, err := c.Has(HeaderKey("c", format.PacketID{1})); ok || err != nil {
		t.Fatalf("has of an absent key: %v %v", ok, err)
	}
	p := NSPrefix(TagHeader, "a", 0)
	var keys []string
	if err := c.Scan(p, PrefixEnd(p), func(k, v []byte) (bool, error) { keys = append(keys, string(v)); return true, nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(keys, ",") != "a,a2" {
		t.Fatalf("scan of namespace a: %v", keys)
	}
	n := 0
	if err := Iterate(c.DB, HeaderPrefix(), func(k, v []byte) error { n++; return nil }); err != nil || n != 6 {
		t.Fatalf("iterate headers: %d, %v", n, err)
	}
	stop := errors.New("stop")
	if err := Iterate(c.DB, HeaderPrefix(), func(k, v []byte) error { return stop }); err != stop {
		t.Fatalf("iterate returns fn's error: %v", err)
	}
}

// TestCatalogFatal: a WAL failure, which Pebble treats as fatal, is an
// error wrapping ErrFailed from Commit (and Close), not a process exit.
func TestCatalogFatal(t *testing.T) {
	var on atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if on.Load() && strings.HasSuffix(op.Path, ".log") {
			return errorfs.ErrInjected
		}
		return nil
	}))
	c, err := openMem(t, fs, false)
	if err != nil {
		t.Fatal(err)
	}
	on.Store(true)
	b := c.DB.NewBatch()
	_ = b.Set(ModelKey(format.Fingerprint{1}), []byte{1}, nil)
	if err := c.Commit(b); !errors.Is(err, ErrFailed) {
		t.Fatalf("commit with a failing WAL: %v, want ErrFailed", err)
	}
	_ = c.Close() // may report the failure again; must not exit or panic
}
