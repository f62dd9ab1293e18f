package testenv

import (
	"fmt"
	"syscall"
)

func mountTmpfs(dir string, size int64) error {
	return syscall.Mount("kvstore-test", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size))
}

func unmount(dir string) error { return syscall.Unmount(dir, syscall.MNT_DETACH) }
