package space

import (
	"errors"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/windows"
)

// allocated cannot tell here: Write writes zeros.
func allocated(f vfs.File, size int64) bool { return false }

// isDiskFull reports Windows' own disk-full errors, which are not ENOSPC.
func isDiskFull(err error) bool {
	return errors.Is(err, windows.ERROR_DISK_FULL) || errors.Is(err, windows.ERROR_HANDLE_DISK_FULL)
}
