package maint

import (
	"fmt"
	"strings"

	"github.com/kvstore/kvstore/format"
)

// FindingKind classifies what Verify or Check found wrong.
type FindingKind string

// Finding kinds. Every one is an inconsistency or corruption: a healthy
// store, crashed or not, has none (see Garbage for what a crash may
// legitimately leave).
const (
	// FindingChunkCRC: a chunk's (or span block's) bytes fail the CRC32C in
	// its record.
	FindingChunkCRC FindingKind = "chunk-crc"
	// FindingTrailer: an extent's trailer is missing, undecodable, names
	// another owner or offset, or its payload CRC does not match.
	FindingTrailer FindingKind = "trailer"
	// FindingRecord: a catalog record does not decode or sits under a key
	// that does not name it.
	FindingRecord FindingKind = "record"
	// FindingDangling: a record points at a blob file that is not
	// catalogued or not on disk, or past its catalogued size or its end.
	FindingDangling FindingKind = "dangling"
	// FindingOverlap: two catalogued extents share bytes.
	FindingOverlap FindingKind = "overlap"
	// FindingAccounting: a blob file record's live or dead bytes or extent
	// counts differ from what the catalog references, or the next-blob
	// sequence is not past every file.
	FindingAccounting FindingKind = "accounting"
	// FindingIndex: an index entry without its header, or a header without
	// its index entry.
	FindingIndex FindingKind = "index"
	// FindingModel: a packet or span memory whose model spec is not
	// catalogued.
	FindingModel FindingKind = "model"
	// FindingBlobHeader: a blob file's 4 KiB header is bad or names another
	// file number.
	FindingBlobHeader FindingKind = "blob-header"
)

// Finding is one problem Verify or Check found, with where it is.
type Finding struct {
	Kind      FindingKind
	File      string // blob file path, when the problem is in one
	Offset    uint64 // in File
	Length    uint64
	Namespace string
	// ID is the packet id, or the context id of a span memory.
	ID      [32]byte
	Context string // span memory name; "" for packets
	// Layer and Chunk locate a bad chunk (Chunk is K, V, or a pruned
	// packet's positions, whose Layer is the packet's layer count); Layer is -1
	// and Chunk 0 when the finding is not about one chunk.
	Layer  int
	Chunk  format.ChunkKind
	Detail string
}

func (f Finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:", f.Kind)
	if f.File != "" {
		fmt.Fprintf(&b, " file %s offset %d (%d bytes)", f.File, f.Offset, f.Length)
	}
	switch {
	case f.Context != "":
		fmt.Fprintf(&b, " span memory %q (%x) in namespace %q", f.Context, f.ID[:8], f.Namespace)
	case f.ID != [32]byte{}:
		fmt.Fprintf(&b, " packet %x in namespace %q", f.ID[:8], f.Namespace)
	}
	if f.Layer >= 0 && f.Chunk != 0 {
		fmt.Fprintf(&b, " layer %d %v", f.Layer, f.Chunk)
	}
	if f.Detail != "" {
		fmt.Fprintf(&b, ": %s", f.Detail)
	}
	return b.String()
}

// RefFinding starts a finding about extent r of file path.
func RefFinding(kind FindingKind, r *ExtentRef, path, detail string) Finding {
	return Finding{Kind: kind, File: path, Offset: r.Offset, Length: r.Length, Namespace: r.Namespace,
		ID: r.ID, Context: r.Context, Layer: -1, Detail: detail}
}

// RecordFinding reports a catalog record that did not decode.
func RecordFinding(b BadRecord) Finding {
	return Finding{Kind: FindingRecord, Layer: -1, Detail: fmt.Sprintf("key %x: %v", b.Key, b.Err)}
}
