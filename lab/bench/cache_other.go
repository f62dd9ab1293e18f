//go:build !linux

package bench

import (
	"errors"
	"fmt"
	"os"
)

// dropFile cannot evict pages here: there is no posix_fadvise.
func dropFile(path string) error {
	return fmt.Errorf("drop cache: %s: %w", path, errors.ErrUnsupported)
}

// allocated is path's apparent size: block counts are Linux's here.
func allocated(path string) (int64, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// FSType fails here: filesystem magic numbers are Linux's.
func FSType(path string) (string, error) {
	return "", fmt.Errorf("statfs %s: %w", path, errors.ErrUnsupported)
}

// sameDevice says no, so DefaultScratch keeps the working directory.
func sameDevice(a, b string) (bool, error) { return false, nil }

// syncAll does nothing here; every store's own syncs still run.
func syncAll() {}
