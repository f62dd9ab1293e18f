package store

import (
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/maint"
)

// FindingKind classifies what Verify or Check found wrong.
type FindingKind string

// Finding kinds (store/internal/maint finds them; reports print their names).
// Every one is an inconsistency or corruption: a healthy store, crashed or
// not, has none (see Garbage for what a crash may legitimately leave).
const (
	// FindingChunkCRC: a chunk's (or span block's) bytes fail the CRC32C in its
	// record.
	FindingChunkCRC FindingKind = "chunk-crc"
	// FindingTrailer: an extent's trailer is missing, undecodable, names another
	// owner or offset, or its payload CRC does not match.
	FindingTrailer FindingKind = "trailer"
	// FindingRecord: a catalog record does not decode or sits under a key that
	// does not name it.
	FindingRecord FindingKind = "record"
	// FindingDangling: a record points at a blob file that is not catalogued or
	// not on disk, or past its catalogued size or its end.
	FindingDangling FindingKind = "dangling"
	// FindingOverlap: two catalogued extents share bytes.
	FindingOverlap FindingKind = "overlap"
	// FindingAccounting: a blob file record's live or dead bytes or extent counts
	// differ from what the catalog references, or the next-blob sequence is not
	// past every file.
	FindingAccounting FindingKind = "accounting"
	// FindingIndex: an index entry without its header, or a header without its
	// index entry.
	FindingIndex FindingKind = "index"
	// FindingModel: a packet or span memory whose model spec is not catalogued.
	FindingModel FindingKind = "model"
	// FindingBlobHeader: a blob file's 4 KiB header is bad or names another file
	// number.
	FindingBlobHeader FindingKind = "blob-header"
)

// String is the kind's name, as reports print it.
func (k FindingKind) String() string { return string(k) }

// Finding is one problem Verify or Check found, with where it is.
type Finding struct {
	// Kind says what is wrong.
	Kind FindingKind
	// File is the blob file's path, when the problem is in one.
	File string
	// Offset and Length are the bad bytes' place in File.
	Offset uint64
	Length uint64
	// Namespace is the packet's or span memory's namespace.
	Namespace string
	// ID is the packet id, or the context id of a span memory.
	ID [32]byte
	// Context is the span memory's name; "" for packets.
	Context string
	// Layer and Chunk locate a bad chunk (Chunk is K, V, or a pruned
	// packet's positions, whose Layer is the packet's layer count); Layer
	// is -1 and Chunk 0 when the finding is not about one chunk.
	Layer int
	Chunk format.ChunkKind
	// Detail says what is wrong, in words.
	Detail string
}

// String describes f on one line: kind, place, owner, chunk and detail.
func (f Finding) String() string { return toFinding(f).String() }

// fromFinding is maint's finding as the store's.
func fromFinding(f maint.Finding) Finding {
	return Finding{Kind: FindingKind(f.Kind), File: f.File, Offset: f.Offset, Length: f.Length, Namespace: f.Namespace,
		ID: f.ID, Context: f.Context, Layer: f.Layer, Chunk: f.Chunk, Detail: f.Detail}
}

// toFinding is f as maint's, which prints it.
func toFinding(f Finding) maint.Finding {
	return maint.Finding{Kind: maint.FindingKind(f.Kind), File: f.File, Offset: f.Offset, Length: f.Length, Namespace: f.Namespace,
		ID: f.ID, Context: f.Context, Layer: f.Layer, Chunk: f.Chunk, Detail: f.Detail}
}
