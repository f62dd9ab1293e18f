// Package bloblog is the store's blob log: append-only, 4 KiB-aligned blob
// files of extents (format/layout.go draws their bytes), and the two ends
// that use them.
//
//   - Writer appends extents to one active file at a time and seals it at
//     its size limit (writer.go). WriteExtent writes one extent's chunks
//     straight from the caller's buffers, with one positioned write each
//     (or one pwritev per few MiB on Linux), computes their CRC32Cs on
//     another goroutine while the writes proceed, combines them into the
//     trailer's payload CRC (crc.go) and starts writeback every few MiB
//     (extent.go).
//   - Scan walks a file's whole extents forward from a known boundary by
//     their trailers, payload CRC checked, without the catalog (scan.go):
//     Open's reconciliation and Recover use it. WriteRecordExtent writes a
//     record (a tombstone) as the whole payload of its own extent.
//   - File is the read side of one blob file (file.go): a reference count,
//     its handle, its read-only mappings (mmap on an OS file system, copies
//     otherwise) and the cache of chunks already verified; Chunk hands out
//     a chunk's verified bytes (chunk.go). AdviseWillNeed asks the kernel to
//     read a mapped range ahead.
//   - Guard (fault.go) contains SIGBUS: a mapped page the file no longer
//     backs (truncated under a live mapping) or that the disk cannot read
//     faults; Go cannot recover that by default, so every read of mapped
//     bytes in this package and the store runs under
//     debug.SetPanicOnFault, and the fault becomes an error wrapping
//     ErrCorruption (the file is now shorter than the read) or
//     syscall.EIO. File sizes are cached, so a truncation is first seen
//     as that fault; the fault refreshes the size, and later spans of the
//     file are refused by their size check. Not covered: bytes handed to
//     a caller (View.Chunk, View.Layer) and touched by the caller's own
//     code.
//
// The package knows files, extents and chunks; it knows nothing of the
// catalog, packets or span memories: the store decides what goes where and
// what a file's records say. Every file goes through a vfs.FS, so that
// vfs.NewCrashableMem and vfs/errorfs exercise it. Errors wrap
// format.ErrCorruption (bad bytes) or carry the file system's error.
package bloblog

import "github.com/kvstore/kvstore/format"

// Sentinels, format's own, so that errors.Is works with either name.
var (
	ErrCorruption      = format.ErrCorruption
	ErrInvalidArgument = format.ErrInvalidArgument
)
