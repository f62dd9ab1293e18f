package store

import "github.com/kvstore/kvstore/store/internal/maint"

// FindingKind classifies what Verify or Check found wrong.
type FindingKind = maint.FindingKind

// Finding kinds (store/internal/maint says what each means). Every one is
// an inconsistency or corruption: a healthy store, crashed or not, has
// none (see Garbage for what a crash may legitimately leave).
const (
	FindingChunkCRC   = maint.FindingChunkCRC   // a chunk's or span block's bytes fail their CRC32C
	FindingTrailer    = maint.FindingTrailer    // an extent's trailer is bad or names another extent
	FindingRecord     = maint.FindingRecord     // a catalog record does not decode or is misplaced
	FindingDangling   = maint.FindingDangling   // a record points at a missing file or past its end
	FindingOverlap    = maint.FindingOverlap    // two catalogued extents share bytes
	FindingAccounting = maint.FindingAccounting // a blob file record's counts are wrong
	FindingIndex      = maint.FindingIndex      // index entries and headers do not match
	FindingModel      = maint.FindingModel      // a model spec referenced is not catalogued
	FindingBlobHeader = maint.FindingBlobHeader // a blob file's header is bad
)

// Finding is one problem Verify or Check found, with where it is.
type Finding = maint.Finding
