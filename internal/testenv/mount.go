package testenv

import "testing"

// Mount is the capability of mounting a size-limited file system for a
// test: a tmpfs of a few MiB that a test fills to get a real full disk
// (ENOSPC from the kernel, not from a fault injector). It needs Linux and
// root (CAP_SYS_ADMIN); SmallFS skips with the reason otherwise.
const Mount Capability = "mount"

// SmallFS mounts a tmpfs of size bytes on a new temporary directory and
// returns the directory; Cleanup unmounts it. Without the capability (not
// Linux, not root, or the mount refused) it skips, or fails when mount is
// required. size is rounded up to whole pages by the kernel.
func SmallFS(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	err := mountTmpfs(dir, size)
	Need(t, Mount, err == nil, "mount a tmpfs (needs Linux and root): "+errText(err))
	t.Cleanup(func() {
		if err := unmount(dir); err != nil {
			t.Errorf("unmount test tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
