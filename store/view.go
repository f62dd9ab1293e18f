package store

import "github.com/kvstore/kvstore/store/internal/view"

// View is a packet read from the store: its header and, chunk by chunk, its
// tensors. On an OS file system the bytes alias a read-only mapping of the
// blob file (zero copies); elsewhere each chunk is copied into the View on
// first use. Chunks are verified against their CRC32C on first read (unless
// Options.DisableChecksums), so no unverified byte is returned.
//
// A View pins its blob file: the bytes stay valid and unchanged, even if the
// packet is deleted or the DB closed, until Release. Slices returned by
// Layer and Chunk must not be written to and must not be used after
// Release. A View is safe for concurrent use. It is store/internal/view's
// View.
//
// If the blob file is truncated under the mapping, or the disk fails to
// read a mapped page, the store's own reads of the view (verification,
// CopyChunk, Assemble) return an error wrapping ErrCorruption or
// syscall.EIO instead of letting SIGBUS end the process
// (store/internal/bloblog/fault.go). Slices Chunk and Layer return alias
// the mapping: the caller's own reads of them are not guarded, so a caller
// that must survive such a file uses CopyChunk or Options.DisableMmap.
type View = view.View

// viewOptions are the views' settings: the DB's checksum option, counters
// and ErrClosed.
func (db *DB) viewOptions() view.Options {
	st := &db.st
	return view.Options{
		Verify: !db.opts.DisableChecksums, Closed: ErrClosed,
		Counters: view.Counters{BytesRead: &st.bytesRead, VerifiedBytes: &st.verifiedBytes, Corruptions: &st.corruptions, Views: &st.views},
	}
}
