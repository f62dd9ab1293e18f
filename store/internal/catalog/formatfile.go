package catalog

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// The FORMAT file, DIR/FORMAT, says which format a store's directory holds
// (format.EncodeFormatFile draws its bytes: magic + format major version).
// It is written last when a store is created, atomically through
// FormatTmpName, so a directory without it holds at most what an
// interrupted creation leaves.
const (
	FormatFileName = "FORMAT"
	FormatTmpName  = "FORMAT.tmp"
)

// ReadFormat reads DIR/FORMAT and checks it (a newer major is ErrVersion,
// a bad one ErrCorruption). found is false, with no error, when the file
// does not exist.
func ReadFormat(fs vfs.FS, dir string) (found bool, err error) {
	path := fs.PathJoin(dir, FormatFileName)
	b, err := readSmall(fs, path)
	if errors.Is(err, iofs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: read %s: %w", path, err)
	}
	if _, err := format.DecodeFormatFile(b); err != nil {
		return true, fmt.Errorf("store: %s: %w", path, err)
	}
	return true, nil
}

// CheckLeftovers refuses (ErrInvalidArgument) a directory without FORMAT
// that holds anything but the names given: what an interrupted creation
// leaves.
func CheckLeftovers(fs vfs.FS, dir string, allowed ...string) error {
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("store: list %s: %w", dir, err)
	}
next:
	for _, n := range names {
		for _, a := range allowed {
			if n == a {
				continue next
			}
		}
		return fmt.Errorf("%w: %s has no FORMAT file but holds %q: not a kvstore store", format.ErrInvalidArgument, dir, n)
	}
	return nil
}

// WriteFormat writes DIR/FORMAT for format.Current atomically (temporary
// file, sync, rename) and syncs the directory, which also makes what was
// created in it durable. It is the last step of creating a store.
func WriteFormat(fs vfs.FS, dir string) error {
	tmp := fs.PathJoin(dir, FormatTmpName)
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
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
	if err := fs.Rename(tmp, fs.PathJoin(dir, FormatFileName)); err != nil {
		return fmt.Errorf("store: rename %s: %w", tmp, err)
	}
	return bloblog.SyncDir(fs, dir)
}

// readSmall reads a small file whole.
func readSmall(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}
