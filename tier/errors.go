package tier

import (
	"errors"
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// Sentinel errors. Every error the tier returns wraps one of these or one
// of store's (ErrInvalidArgument for unusable arguments), so callers test
// with errors.Is and read the text for what and where.
var (
	// ErrUnavailable: the object store could not be reached or kept
	// failing (refused connections, timeouts, 5xx, throttling, denied
	// access) after the retries Options allows. Nothing wrong was
	// returned; the call may succeed later.
	ErrUnavailable = errors.New("kvstore/tier: object store unavailable")
	// ErrCorruption wraps format.ErrCorruption (store.ErrCorruption), so
	// errors.Is matches either name: an object's bytes failed a CRC32C, a
	// length or a structural check, even after refetching.
	ErrCorruption = fmt.Errorf("kvstore/tier: %w", format.ErrCorruption)
	// ErrNotFound wraps store.ErrNotFound: the tier has no such packet
	// (no header object under its key).
	ErrNotFound = fmt.Errorf("kvstore/tier: %w", store.ErrNotFound)
	// ErrInvalidArgument is store.ErrInvalidArgument itself.
	ErrInvalidArgument = store.ErrInvalidArgument
)

// errExists is what a conditional create meets when the object is there
// already (HTTP 412); callers turn it into convergence or a conflict.
var errExists = errors.New("kvstore/tier: object exists")
