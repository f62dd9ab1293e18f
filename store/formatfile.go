package store

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// checkFormat reads DIR/FORMAT. It reports true when the store is to be
// created: no FORMAT, and nothing in the directory but what an interrupted
// creation leaves.
func (db *DB) checkFormat() (create bool, err error) {
	path := db.fs.PathJoin(db.dir, formatFileName)
	b, err := readFile(db.fs, path)
	if err == nil {
		if _, err := format.DecodeFormatFile(b); err != nil {
			return false, fmt.Errorf("store: %s: %w", path, err)
		}
		return false, nil
	}
	if !errors.Is(err, iofs.ErrNotExist) {
		return false, fmt.Errorf("store: read %s: %w", path, err)
	}
	if db.opts.ReadOnly {
		return false, fmt.Errorf("%w: no store at %s (no FORMAT file)", ErrNotFound, db.dir)
	}
	names, err := db.fs.List(db.dir)
	if err != nil {
		return false, fmt.Errorf("store: list %s: %w", db.dir, err)
	}
	for _, n := range names {
		switch n {
		case lockFileName, catalogDirName, blobsDirName, formatTmpName:
		default:
			return false, fmt.Errorf("%w: %s has no FORMAT file but holds %q: not a kvstore store", ErrInvalidArgument, db.dir, n)
		}
	}
	return true, nil
}

// writeFormat writes FORMAT atomically (temporary file, sync, rename) and
// syncs the directory, which also makes catalog/ and blobs/ durable. It is
// the last step of creating a store.
func (db *DB) writeFormat() error {
	tmp := db.fs.PathJoin(db.dir, formatTmpName)
	f, err := db.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("store: create %s: %w", tmp, err)
	}
	_, err = f.Write(format.EncodeFormatFile(format.Current))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: write %s: %w", tmp, err)
	}
	if err := db.fs.Rename(tmp, db.fs.PathJoin(db.dir, formatFileName)); err != nil {
		return fmt.Errorf("store: rename %s: %w", tmp, err)
	}
	return bloblog.SyncDir(db.fs, db.dir)
}

// readFile reads a small file whole.
func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}
