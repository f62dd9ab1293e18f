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
// directory, or neither FORMAT nor FORMAT.copy, is an error wrapping
// notFound (the store's ErrNotFound), unless its blobs subdirectory holds
// blob files: then it is a store that lost its FORMAT files
// (ErrCorruption, LostFormat). FORMAT is read and checked again under the
// lock. A path that is not a directory is ErrInvalidArgument for every
// open.
func RequireStore(fs vfs.FS, dir, blobs string, must bool, notFound error) error {
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
	for _, name := range formatFiles {
		if _, err := fs.Stat(fs.PathJoin(dir, name)); err == nil {
			return nil
		} else if !errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("store: stat %s: %w", fs.PathJoin(dir, name), err)
		}
	}
	if err := LostFormat(fs, dir, blobs); err != nil {
		return err
	}
	return fmt.Errorf("%w: no store at %s (no FORMAT file)", notFound, dir)
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
