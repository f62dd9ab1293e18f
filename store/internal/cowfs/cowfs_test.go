package cowfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// files returns every file of fsys below dir and its bytes.
func files(t *testing.T, fsys vfs.FS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		p := fsys.PathJoin(dir, n)
		st, err := fsys.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.IsDir() {
			for k, v := range files(t, fsys, p) {
				out[k] = v
			}
			continue
		}
		out[p] = read(t, fsys, p)
	}
	return out
}

func read(t *testing.T, fsys vfs.FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func write(t *testing.T, fsys vfs.FS, name, data string) {
	t.Helper()
	f, err := fsys.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLayers: reads fall through to the base, every change stays in
// memory, and the base's bytes never change.
func TestLayers(t *testing.T) {
	base := vfs.NewMem()
	if err := base.MkdirAll("/d/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, base, "/d/a", "base a")
	write(t, base, "/d/b", "base b")
	write(t, base, "/d/sub/c", "base c")
	before := files(t, base, "/")

	c := New(base)
	if got := read(t, c, "/d/a"); got != "base a" {
		t.Fatalf("read through: %q", got)
	}
	write(t, c, "/d/new", "new")
	write(t, c, "/d/b", "shadow b")
	f, err := c.OpenReadWrite("/d/a", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("A"), 0); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if err := c.Rename("/d/sub/c", "/d/moved"); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove("/d/new"); err != nil {
		t.Fatal(err)
	}
	if err := c.MkdirAll("/e", 0o755); err != nil {
		t.Fatal(err)
	}
	lk, err := c.Lock("/d/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	_ = lk.Close()

	want := map[string]string{"/d/a": "Aase a", "/d/b": "shadow b", "/d/moved": "base c", "/d/LOCK": ""}
	if got := files(t, c, "/d"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("through the layers: %v, want %v", got, want)
	}
	names, err := c.List("/d")
	if err != nil || !slices.Equal(names, []string{"LOCK", "a", "b", "moved", "sub"}) {
		t.Fatalf("List: %v %v", names, err)
	}
	for _, gone := range []string{"/d/new", "/d/sub/c"} {
		if _, err := c.Open(gone); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Open of removed %s: %v", gone, err)
		}
		if _, err := c.Stat(gone); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Stat of removed %s: %v", gone, err)
		}
	}
	if err := c.Remove("/d/new"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("second Remove: %v", err)
	}
	if err := c.RemoveAll("/d/sub"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.List("/d/sub"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("List of a removed directory: %v", err)
	}
	if _, err := c.Open("/nowhere"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a file neither layer has: %v", err)
	}
	if after := files(t, base, "/"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the base changed:\n%v\nwas\n%v", after, before)
	}
}

// TestPebbleOverBase opens a Pebble store read-write through the layers,
// writes and compacts it: it reads back through the layers after a
// reopen, while the base's files stay byte for byte as they were and a
// read-only open of the base sees only the original keys.
func TestPebbleOverBase(t *testing.T) {
	base := vfs.NewMem()
	db, err := pebble.Open("/cat", &pebble.Options{FS: base, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		_ = db.Set(fmt.Appendf(nil, "k%03d", i), bytes.Repeat([]byte{byte(i)}, 100), pebble.Sync)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = db.Set([]byte("in-wal"), []byte("v"), pebble.Sync)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := files(t, base, "/")

	c := New(base)
	db, err = pebble.Open("/cat", &pebble.Options{FS: c, ErrorIfNotExists: true, DisableAutomaticCompactions: true, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 150; i++ {
		_ = db.Set(fmt.Appendf(nil, "k%03d", i), []byte("new"), pebble.Sync)
	}
	_ = db.Delete([]byte("k000"), pebble.Sync)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(context.Background(), []byte("k"), []byte("l"), true); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = pebble.Open("/cat", &pebble.Options{FS: c, ReadOnly: true, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	count := func(db *pebble.DB) int {
		it, _ := db.NewIter(nil)
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		_ = it.Close()
		return n
	}
	if n := count(db); n != 150 { // 99 + 50 + in-wal
		t.Fatalf("through the layers after a reopen: %d keys, want 150", n)
	}
	_ = db.Close()
	if after := files(t, base, "/"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("Pebble's writes through the layers reached the base")
	}
	db, err = pebble.Open("/cat", &pebble.Options{FS: base, ReadOnly: true, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := count(db); n != 101 {
		t.Fatalf("the base: %d keys, want the original 101", n)
	}
}

// quiet is a Pebble logger that drops its lines.
type quiet struct{}

func (quiet) Infof(string, ...any)         {}
func (quiet) Errorf(string, ...any)        {}
func (quiet) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
