package dirsync

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

func TestSync(t *testing.T) {
	dir := t.TempDir()
	if err := Sync(dir); err != nil {
		t.Fatalf("sync %s: %v", dir, err)
	}
	missing := filepath.Join(dir, "missing")
	if err := Sync(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("sync of a missing directory: %v, want fs.ErrNotExist", err)
	}
}
