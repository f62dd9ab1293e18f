package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A read-only or MustExist open of a directory that holds no store fails
// with ErrNotFound and leaves nothing behind (it used to leave a LOCK
// file, and a writable open created a store); a path that is a regular
// file is ErrInvalidArgument, not "locked".
func TestOpenNonStoreLeavesNothing(t *testing.T) {
	for _, o := range []*Options{{ReadOnly: true}, {MustExist: true}} {
		dir := t.TempDir()
		if db, err := Open(dir, o); !errors.Is(err, ErrNotFound) {
			if err == nil {
				db.Close()
			}
			t.Fatalf("Open(%+v) of an empty directory: %v, want ErrNotFound", *o, err)
		}
		if names, _ := os.ReadDir(dir); len(names) != 0 {
			t.Fatalf("Open(%+v) left %v in a directory that is not a store", *o, names)
		}
		missing := filepath.Join(dir, "typo")
		if _, err := Open(missing, o); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Open(%+v) of a missing directory: %v, want ErrNotFound", *o, err)
		}
		if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Open(%+v) created %s", *o, missing)
		}
	}
	file := filepath.Join(t.TempDir(), "regular")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, o := range []*Options{nil, {ReadOnly: true}} {
		if _, err := Open(file, o); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Open of a regular file: %v, want ErrInvalidArgument", err)
		}
	}
	// MustExist opens an existing store as usual.
	dir := t.TempDir()
	db, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = Open(dir, &Options{MustExist: true}); err != nil {
		t.Fatalf("MustExist open of a store: %v", err)
	}
	db.Close()
}
