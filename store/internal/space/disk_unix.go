//go:build unix

package space

import (
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// isDiskFull: on unix a full disk is ENOSPC, which NoSpace tests itself.
func isDiskFull(error) bool { return false }

// allocated reports whether f's blocks cover size bytes, where the FS
// says (stat's block count on unix); false when it cannot tell.
func allocated(f vfs.File, size int64) bool {
	st, err := f.Stat()
	if err != nil {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int64(sys.Blocks)*512 >= size
}
