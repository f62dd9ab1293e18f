package catalog

import (
	"errors"
	"fmt"
	iofs "io/fs"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// RequireStore, for a read-only or MustExist open (must), refuses a
// path that holds no store before anything is created in it or locked: no
// directory or no FORMAT file is an error wrapping notFound (the store's
// ErrNotFound). FORMAT is read and checked again under the lock. A path
// that is not a directory is ErrInvalidArgument for every open.
func RequireStore(fs vfs.FS, dir string, must bool, notFound error) error {
	st, err := fs.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return fmt.Errorf("%w: %s is not a directory", format.ErrInvalidArgument, dir)
	case err != nil && !errors.Is(err, iofs.ErrNotExist):
		return fmt.Errorf("store: stat %s: %w", dir, err)
	case !must:
		return nil
	case err != nil:
		return fmt.Errorf("%w: no store at %s (no such directory)", notFound, dir)
	}
	if _, err := fs.Stat(fs.PathJoin(dir, FormatFileName)); errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("%w: no store at %s (no FORMAT file)", notFound, dir)
	} else if err != nil {
		return fmt.Errorf("store: stat %s: %w", fs.PathJoin(dir, FormatFileName), err)
	}
	return nil
}

// PrepareDir makes sure dir exists, creating it and syncing its parent
// when it does not (RequireStore has already refused a missing dir for an
// open that must find a store).
func PrepareDir(fs vfs.FS, dir string) error {
	if _, err := fs.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("store: stat %s: %w", dir, err)
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("store: create %s: %w", dir, err)
	}
	return bloblog.SyncDir(fs, fs.PathDir(dir))
}
