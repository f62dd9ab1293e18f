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
// its header; it wraps ErrCorruption and says where the chunk is. Reads
// that verify chunks (View's Chunk, CopyChunk, Layer and Keep, Assemble
// and what prepares and runs it) return one, possibly wrapped: find it
// with errors.As.
type ChunkError struct {
	// File is the blob file's path.
	File string
	// Offset and Length place the chunk in File.
	Offset uint64
	Length uint64
	// Packet, Layer and Kind name the chunk: packet, layer, and K, V or
	// a pruned packet's positions.
	Packet format.PacketID
	Layer  uint32
	Kind   format.ChunkKind
	// Want is the CRC32C in the header, Computed that of the bytes read.
	Want     uint32
	Computed uint32
}

// Error says where the chunk is and both CRCs.
func (e *ChunkError) Error() string { return (*bloblog.ChunkError)(e).Error() }

// Unwrap makes errors.Is(err, ErrCorruption) hold.
func (e *ChunkError) Unwrap() error { return ErrCorruption }

// chunkError returns err with the store's *ChunkError in place of the
// *bloblog.ChunkError it holds, if any: the same error when that is all
// err is, else err (its text and chain kept) joined with it, so that
// errors.As finds the store's type. Every exported call that verifies
// chunks returns its error through it.
func chunkError(err error) error {
	var in *bloblog.ChunkError
	if !errors.As(err, &in) {
		return err
	}
	ce := (*ChunkError)(in)
	if err == error(in) {
		return ce
	}
	return &chunkErrorChain{err: err, chunk: ce}
}

// chunkErrorChain is an error whose chain holds a *bloblog.ChunkError,
// with the store's *ChunkError for the same chunk beside it.
type chunkErrorChain struct {
	err   error
	chunk *ChunkError
}

func (e *chunkErrorChain) Error() string   { return e.err.Error() }
func (e *chunkErrorChain) Unwrap() []error { return []error{e.chunk, e.err} }
