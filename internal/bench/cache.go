package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

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

func dropFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("drop cache: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("drop cache: fsync %s: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("drop cache: fadvise %s: %w", path, err)
	}
	return nil
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
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); errors.Is(err, unix.ENOENT) {
			return nil
		} else if err != nil {
			return fmt.Errorf("disk usage: %s: %w", path, err)
		}
		total += st.Blocks * 512
		return nil
	})
	return total, err
}

// FSType names the filesystem holding path ("ext4", "xfs", "tmpfs", ... or
// the magic number in hex when it is not one of the common ones).
func FSType(path string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "", fmt.Errorf("statfs %s: %w", path, err)
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4", nil
	case unix.XFS_SUPER_MAGIC:
		return "xfs", nil
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs", nil
	case unix.TMPFS_MAGIC:
		return "tmpfs", nil
	case unix.RAMFS_MAGIC:
		return "ramfs", nil
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay", nil
	}
	return fmt.Sprintf("0x%x", st.Type), nil
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

func sameDevice(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, fmt.Errorf("stat %s: %w", a, err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, fmt.Errorf("stat %s: %w", b, err)
	}
	return sa.Dev == sb.Dev, nil
}
