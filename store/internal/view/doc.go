// Package view is a packet read from the store: View, its header and,
// chunk by chunk, its verified tensors. A view aliases a read-only
// mapping of its blob file when there is one and copies chunks in on
// first use otherwise; each chunk is verified against its CRC32C the
// first time it is read (bloblog's per-file cache remembers mapped chunks
// verified), compressed chunks are decoded once into buffers the view
// keeps (Decode), and a pruned packet's positions chunk becomes its
// keep-set (Keep, DecodePositions; the bitmap is drawn in
// format/positions.go). Source lends a view to store/internal/assemble,
// which checks a chunk's CRC32C in the pass that places its rows.
//
// The store's View wraps this type. It knows nothing of the DB: the store
// hands it the header, the pinned blob file, whether to verify, its
// counters and its ErrClosed (Options).
package view

import "github.com/kvstore/kvstore/format"

// The errors are format's, so that errors.Is works with the store's names
// for them too.
var (
	ErrInvalidArgument = format.ErrInvalidArgument
	ErrCorruption      = format.ErrCorruption
)
