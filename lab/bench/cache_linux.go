package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// dropFile fsyncs path and advises its pages out of the page cache; a
// file that is gone is skipped.
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

// allocated is the space path occupies on disk: its allocated blocks.
func allocated(path string) (int64, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return 0, err // unix.ENOENT is fs.ErrNotExist
	}
	return st.Blocks * 512, nil
}

// FSType names the filesystem holding path ("ext4", "xfs", "tmpfs", ... or
// the magic number in hex when it is not one of the common ones).
func FSType(path string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "", fmt.Errorf("statfs %s: %w", path, err)
	}
	magic := uint32(st.Type) // int32 on 386, where some magics look negative
	switch magic {
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
	return fmt.Sprintf("0x%x", magic), nil
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

// syncAll flushes every dirty page of the machine (sync(2)).
func syncAll() { unix.Sync() }
