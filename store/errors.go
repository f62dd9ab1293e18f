package store

import (
	"errors"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/space"
)

// Sentinel errors. Every error the store returns wraps one of these (or an
// I/O error from the file system), so callers test with errors.Is and read
// the text for what and where.
var (
	// ErrNotFound: no such packet, model spec or store.
	ErrNotFound = errors.New("kvstore/store: not found")
	// ErrCorruption is format.ErrCorruption itself, so that errors.Is works
	// with either name: bytes on disk failed a checksum or a structural check.
	ErrCorruption = format.ErrCorruption
	// ErrInvalidArgument is format.ErrInvalidArgument itself: a call's
	// arguments are unusable (bad lengths, shapes, names, options).
	ErrInvalidArgument = format.ErrInvalidArgument
	// ErrVersion is format.ErrVersion itself: the store or a record was
	// written by a newer format than this build reads.
	ErrVersion = format.ErrVersion
	// ErrModelMismatch: the packet exists in the namespace, but under
	// another model fingerprint. It is never served for the asked model.
	ErrModelMismatch = errors.New("kvstore/store: packet belongs to another model")
	// ErrClosed: the DB was closed, or the View released.
	ErrClosed = errors.New("kvstore/store: closed")
	// ErrLocked: another DB (in this or another process) holds the store.
	ErrLocked = errors.New("kvstore/store: store is open elsewhere")
	// ErrReadOnly: a write on a DB opened with Options.ReadOnly.
	ErrReadOnly = errors.New("kvstore/store: read-only")
	// ErrFailed: an earlier catalog commit failed in a way the catalog cannot
	// recover from without reopening (Pebble treats WAL errors as fatal).
	// Reads may continue; writes return it until the DB is reopened.
	ErrFailed = catalog.ErrFailed
	// ErrNoSpace: no room. Either the disk is full: every error a full
	// disk caused wraps it (and still syscall.ENOSPC), and Open or a write
	// on a nearly full disk returns it when the store's space reserve is
	// released (space.go says what is held and how to free room). Or a Put
	// would take the store past Options.MaxBytes and evicting every
	// unpinned packet (other than the one being put) could not make room;
	// nothing was then written or evicted.
	ErrNoSpace = space.ErrNoSpace
)

// ChunkError reports a chunk whose stored bytes do not match the CRC32C in
// its header; it wraps ErrCorruption and says where the chunk is.
type ChunkError = bloblog.ChunkError
