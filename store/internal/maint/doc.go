// Package maint is the store's maintenance as functions of explicit state:
// Verify (read every catalogued extent and check each chunk's and span
// block's CRC32C and each trailer), Check (the catalog against the blob
// files, without reading payloads: findings apart from reclaimable
// garbage), and the pieces Compact and GC share with them: the walk over
// every catalogued extent (WalkRefs, ExtentRef), the blob file records
// (LoadRecords), an extent's checksummed regions (PacketRegions,
// SpanRegions, CRCRegions, TrailerProblem) and the blob files on disk
// (DiskFiles).
//
// It gets what it reads through Store: the catalog, the file system and
// blobs/ directory, and the registry of open blob files behind the Files
// interface. It never sees the store's DB, takes no lock, and writes
// nothing: store.DB admits the call, holds the writer lock where the
// operation needs one (Check), and returns the reports under its own
// names (store.VerifyReport = maint.VerifyReport, ...).
//
// The bytes it checks are format's: the extent trailer (format.Trailer),
// the blob header, the packet header's chunk table, span memory records
// (format.SpanMeta, format.HeadMeta); docs/format.md draws each one.
package maint
