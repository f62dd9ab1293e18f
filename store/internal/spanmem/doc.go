// Package spanmem is SeKV's span memory as data: Build turns a long
// context's KV cache into a Memory (segmentation by surprisal, span
// summaries and routing projections, truncated SVD factors of every
// factored span's pre-RoPE keys and values, the resident rows; spans kept
// factored only where that makes the memory smaller, a memory no smaller
// than its rows refused with ErrNotSmaller), Check validates one, and LayoutExtent lays it out as one blob-log extent and
// its catalog records (format.SpanMeta, format.HeadMeta; the bytes are
// format's, docs/format.md draws them) and SetRecords adds those records
// to a batch. On the read side, Blocks reads a stored memory's blocks
// verified against their CRC32C (FactorBlock, CheckHead and SameWrite
// answer what a reader asks of the records), and NewRouting builds the
// zoom-in policy (Routing: Score, Zoom) from the W, tau and bias the store
// read. Reader (the store's SpanReader) reads one stored memory piece by
// piece: head records on first use through Records (the store's catalog),
// blocks through Blocks. format.ComputeContextID names a stored memory.
//
// It takes the model's SeKV artifacts as inputs (the Artifacts interface)
// and never reaches into the store: the store reads the artifacts from its
// catalog, and store/internal/spandb writes, syncs and catalogues what
// LayoutExtent produced.
package spanmem

import "github.com/kvstore/kvstore/format"

// ErrInvalidArgument is format's, so that errors.Is works with the
// store's name for it too.
var ErrInvalidArgument = format.ErrInvalidArgument
