package store

import (
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/spandb"
)

// SpanMemoryInfo describes one stored span memory as its root record
// says, without reading its head records or its extent.
type SpanMemoryInfo struct {
	// Namespace and Name are what it is stored under; Context is its id
	// (ComputeContextID) and Model its model's fingerprint.
	Namespace string
	Name      string
	Context   ContextID
	Model     format.Fingerprint
	// Tokens is the context's length.
	Tokens int
	// Spans is the segments of the context; Factored those kept as SVD
	// factors.
	Spans    int
	Factored int
	// Anchors is the anchor rows; Resident the rows kept at full
	// resolution (anchors and unfactored spans' tokens).
	Anchors  int
	Resident int
	// Layers, KVHeads and HeadDim are the model's shape.
	Layers  int
	KVHeads int
	HeadDim int
	// ProjDim is d' of the routing projection; 0 for none.
	ProjDim int
	// ResidentDType is the resident rows' dtype, FactorDType the factors'.
	ResidentDType, FactorDType format.DType
	// Projection is the routing artifact's name; "" for none.
	Projection string
	// BlobFile, ExtentOffset and ExtentLength place its extent; the
	// length is what the memory occupies.
	BlobFile     uint32
	ExtentOffset uint64
	ExtentLength uint64
	// Created is when it was stored.
	Created time.Time
}

// fromSpanMemoryInfo is spandb's description as the store's (the same
// fields).
func fromSpanMemoryInfo(i spandb.Info) SpanMemoryInfo { return SpanMemoryInfo(i) }

// SpanMemories calls fn with every stored span memory, in catalog order
// (namespace, then name), stopping at the first error fn returns, which
// it returns. A root record that does not decode, or whose key does not
// name its context, stops the walk with ErrCorruption naming the key. It is
// meant for tools (ls, inspect); OpenSpanMemory reads a memory's heads.
func (db *DB) SpanMemories(fn func(SpanMemoryInfo) error) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	return spandb.List(db.cat, func(i spandb.Info) error { return fn(fromSpanMemoryInfo(i)) })
}

// loadSpanCount counts the catalogued span memories at Open, for Stats.
func (db *DB) loadSpanCount() error {
	n, err := spandb.Count(db.cat)
	if err != nil {
		return err
	}
	db.st.spanMemories.Store(n)
	return nil
}

// setSpanRecords installs records that a committed span memory batch
// wrote and moves the span memory count by delta under the same lock, so
// that Stats never sees the one without the other.
func (db *DB) setSpanRecords(delta int64, rs ...blobRecord) {
	db.filesMu.Lock()
	defer db.filesMu.Unlock()
	db.st.spanMemories.Add(delta)
	for _, r := range rs {
		r.Path = db.files[r.Num].Path()
		db.recs[r.Num] = r
	}
}
