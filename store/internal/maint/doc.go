// Package maint is the store's maintenance as functions of explicit state:
// Verify (read every catalogued extent and check each chunk's and span
// block's CRC32C and each trailer), Check (the catalog against the blob
// files, without reading payloads: findings apart from reclaimable
// garbage), Compact (Compaction: pick, copy, batch; Writer.Compact: the
// groups, each committed and installed before the next) and GC (PlanGC;
// Writer.GC: orphans removed, dead records dropped, tails compacted), and
// the pieces they share: the walk over every catalogued extent (WalkRefs,
// ExtentRef), the blob file records (LoadRecords), an extent's
// checksummed regions (PacketRegions, SpanRegions, CRCRegions,
// TrailerProblem), the blob files on disk (DiskFiles) and the compaction
// debt (Debt).
//
// It gets what it reads through Store: the catalog, the file system and
// blobs/ directory, and the registry of open blob files behind the Files
// interface. What changes the store goes through Writer: the Registry
// interface it installs committed records into and retires files through,
// the catalog commit, the next blob file number, and callbacks for what
// the store counts, logs and publishes. It never sees the store's DB and
// takes no lock: store.DB admits the call, holds the writer lock where the
// operation needs one (Check, Compact, GC), and returns the reports under
// its own names (store.VerifyReport = maint.VerifyReport, ...).
//
// The bytes it checks and writes are format's: the extent trailer
// (format.Trailer), the blob header, the packet header's chunk table, span
// memory records (format.SpanMeta, format.HeadMeta); docs/format.md draws
// each one.
package maint
