package bench

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDropCacheAndDiskUsage(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<16)
	for i := range data {
		data[i] = byte(i)
	}
	for _, name := range []string{"a", "sub/b"} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := DropCache(dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "sub/b"))
	if err != nil || len(got) != len(data) || got[1000] != data[1000] {
		t.Fatalf("file changed by DropCache: %v", err)
	}
	n, err := DiskUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n < 2<<16 {
		t.Fatalf("disk usage %d, want at least the %d bytes written", n, 2<<16)
	}
	if err := DropCache(filepath.Join(dir, "missing")); err != nil {
		t.Fatalf("DropCache of a vanished directory: %v", err)
	}
}

func TestDefaultScratch(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DefaultScratch(wd)
	if err != nil {
		t.Fatal(err)
	}
	if got != wd && got != os.TempDir() {
		t.Fatalf("DefaultScratch = %s, want %s or %s", got, wd, os.TempDir())
	}
	fs, err := FSType(got)
	if err != nil {
		t.Fatal(err)
	}
	if memoryFS(fs) && got != wd {
		t.Fatalf("DefaultScratch chose %s on %s", got, fs)
	}
	same, err := sameDevice(got, wd)
	if err != nil || !same {
		t.Fatalf("DefaultScratch chose %s, not on the disk of %s (%v)", got, wd, err)
	}
}
