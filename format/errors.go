package format

import "errors"

// Sentinel errors. Every error returned by this package wraps one of them, so
// callers test with errors.Is and read the wrapped text for what and where.
var (
	// ErrCorruption reports bytes that fail a checksum, a magic number, a
	// bounds check or any other structural check.
	ErrCorruption = errors.New("kvstore/format: corruption")
	// ErrInvalidArgument reports a value that cannot be encoded: a bad
	// dtype, a shape that overflows, a field out of range.
	ErrInvalidArgument = errors.New("kvstore/format: invalid argument")
	// ErrVersion reports a format version newer than this code understands.
	ErrVersion = errors.New("kvstore/format: unsupported format version")
)
