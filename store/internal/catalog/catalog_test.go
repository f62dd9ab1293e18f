package catalog

import (
	"errors"
	"fmt"
	"io"
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

// TestOpenInMemory: an in-memory open of an existing catalog takes
// commits, synced or not, and serves them, while the catalog on disk keeps
// its state and bytes.
func TestOpenInMemory(t *testing.T) {
	mem := vfs.NewMem()
	if _, err := Open("/cat", &Options{FS: mem, InMemory: true, Logger: quiet}); err == nil {
		t.Fatal("an in-memory open created a catalog")
	}
	c, err := openMem(t, mem, false)
	if err != nil {
		t.Fatal(err)
	}
	unsyncedSet(t, c, "disk", "1")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	before := catalogFiles(t, mem)
	c, err = Open("/cat", &Options{FS: mem, InMemory: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	b := c.DB.NewBatch()
	_ = b.Set([]byte("memory"), []byte("2"), nil)
	_ = b.Delete([]byte("disk"), nil)
	if err := c.Commit(b); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	if ok, err := c.Has([]byte("memory")); !ok || err != nil {
		t.Fatalf("in memory: the commit is not served: %v %v", ok, err)
	}
	if ok, err := c.Has([]byte("disk")); ok || err != nil {
		t.Fatalf("in memory: the deleted key is served: %v %v", ok, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if after := catalogFiles(t, mem); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("an in-memory open wrote to the catalog's directory")
	}
	if !has(t, mem, "disk") || has(t, mem, "memory") {
		t.Fatal("the catalog on disk changed")
	}
}

// catalogFiles returns the files of /cat on fs and their bytes.
func catalogFiles(t *testing.T, fs vfs.FS) map[string]string {
	t.Helper()
	names, err := fs.List("/cat")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		f, err := fs.Open(fs.PathJoin("/cat", n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}
