//go:build !unix && !windows

package store

import "github.com/cockroachdb/pebble/v2/vfs"

// allocated cannot tell here: writeReserve writes zeros.
func allocated(f vfs.File, size int64) bool { return false }

// isDiskFull: only ENOSPC here, which noSpace tests itself.
func isDiskFull(error) bool { return false }
