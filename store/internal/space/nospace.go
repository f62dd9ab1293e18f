package space

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// ErrNoSpace is the store's store.ErrNoSpace: no room on the disk, or
// under the store's capacity.
var ErrNoSpace = errors.New("kvstore/store: no space")

// NoSpace wraps in ErrNoSpace an error a full disk caused: one wrapping
// ENOSPC, or one whose text names it. Pebble flattens some errors into
// text (a failed WAL write reaches us as a fatal message, a failed
// MANIFEST write at open as a formatted error), so for those the text is
// the only trace; they get syscall.ENOSPC wrapped back in.
func NoSpace(err error) error {
	switch {
	case err == nil || errors.Is(err, ErrNoSpace):
		return err
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	case isDiskFull(err):
		return fmt.Errorf("%w: %w (%w)", ErrNoSpace, err, syscall.ENOSPC)
	case strings.Contains(err.Error(), syscall.ENOSPC.Error()):
		return fmt.Errorf("%w: %w (%w)", ErrNoSpace, err, syscall.ENOSPC)
	}
	return err
}
