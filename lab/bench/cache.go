package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The page cache, disk usage and filesystem calls are Linux's
// (cache_linux.go); elsewhere (cache_other.go) the harness builds but
// DropCache and FSType fail with errors.ErrUnsupported, as ReadIOCounters
// does, so Run reports the failure instead of figures it cannot make.

// DropCache evicts the page cache of every regular file under dir: each is
// fsynced (dirty pages cannot be dropped) and then advised away with
// posix_fadvise(POSIX_FADV_DONTNEED). Pages that a process still has
// mapped are not evicted by the kernel; close the store first. A file that
// disappears meanwhile (an open store deleting obsolete files) is skipped.
func DropCache(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		return dropFile(path)
	})
}

// DiskUsage is the space the files under dir occupy on disk (allocated
// blocks, so sparse files count only what they use).
func DiskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		n, err := allocated(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return fmt.Errorf("disk usage: %s: %w", path, err)
		}
		total += n
		return nil
	})
	return total, err
}

// memoryFS reports whether a filesystem type keeps files in memory, where a
// cold read means nothing.
func memoryFS(t string) bool { return t == "tmpfs" || t == "ramfs" }

// DefaultScratch picks where Run should put its stores when the caller
// gives no directory: the system temporary directory when it is on the
// same device as workdir and is not in memory, otherwise workdir itself
// (a benchmark of storage on tmpfs measures memcpy).
func DefaultScratch(workdir string) (string, error) {
	tmp := os.TempDir()
	t, err := FSType(tmp)
	if err != nil {
		return "", err
	}
	same, err := sameDevice(tmp, workdir)
	if err != nil {
		return "", err
	}
	if same && !memoryFS(t) {
		return tmp, nil
	}
	return workdir, nil
}
