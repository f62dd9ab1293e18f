package store

import (
	"fmt"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// SpanMemoryInfo describes one stored span memory as its root record
// says, without reading its head records or its extent.
type SpanMemoryInfo struct {
	Namespace string
	Name      string
	Context   ContextID
	Model     format.Fingerprint
	Tokens    int
	Spans     int // segments of the context
	Factored  int // spans kept as SVD factors
	Anchors   int
	Resident  int // rows kept at full resolution (anchors and unfactored spans' tokens)
	Layers    int
	KVHeads   int
	HeadDim   int
	ProjDim   int // d' of the routing projection; 0 for none
	// ResidentDType is the resident rows' dtype, FactorDType the factors'.
	ResidentDType, FactorDType format.DType
	Projection                 string // routing artifact name; "" for none
	BlobFile                   uint32
	ExtentOffset               uint64
	ExtentLength               uint64 // bytes of the extent: what the memory occupies
	Created                    time.Time
}

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
	p := []byte{catalog.TagSpanMeta}
	return db.cat.Scan(p, catalog.PrefixEnd(p), func(k, v []byte) (bool, error) {
		ns, name, ok := catalog.ParseSpanMetaKey(k)
		m, err := decodeSpanMeta(v)
		if err == nil && (!ok || m.Context != ComputeContextID(ns, m.Model, name)) {
			err = fmt.Errorf("%w: the key does not name the record's context", ErrCorruption)
		}
		if err != nil {
			return false, fmt.Errorf("store: span memory record under key %x: %w", k, err)
		}
		if err := fn(spanMemoryInfo(ns, name, m)); err != nil {
			return false, err
		}
		return true, nil
	})
}

// spanMemoryInfo summarises root record m of (ns, name).
func spanMemoryInfo(ns, name string, m *SpanMeta) SpanMemoryInfo {
	info := SpanMemoryInfo{Namespace: ns, Name: name, Context: m.Context, Model: m.Model,
		Tokens: m.Tokens, Spans: len(m.Spans), Anchors: len(m.Anchors), Resident: len(m.Resident),
		Layers: m.Layers, KVHeads: m.KVHeads, HeadDim: m.HeadDim, ProjDim: m.ProjDim,
		ResidentDType: m.ResidentDType, FactorDType: m.FactorDType, Projection: m.Projection,
		BlobFile: m.BlobFile, ExtentOffset: m.ExtentOffset, ExtentLength: m.ExtentLength,
		Created: time.Unix(0, m.CreatedUnixNs).UTC()}
	for _, s := range m.Spans {
		if s.Factored {
			info.Factored++
		}
	}
	return info
}

// loadSpanCount counts the catalogued span memories at Open, for Stats.
func (db *DB) loadSpanCount() error {
	p := []byte{catalog.TagSpanMeta}
	n := int64(0)
	err := db.cat.Scan(p, catalog.PrefixEnd(p), func(k, v []byte) (bool, error) {
		n++
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("store: count span memories: %w", err)
	}
	db.st.spanMemories.Store(n)
	return nil
}

// setSpanRecords installs records that a committed span memory batch
// wrote and moves the span memory count by delta under the same lock, so
// that Stats never sees the one without the other.
func (db *DB) setSpanRecords(delta int64, rs ...BlobFileInfo) {
	db.filesMu.Lock()
	defer db.filesMu.Unlock()
	db.st.spanMemories.Add(delta)
	for _, r := range rs {
		r.Path = db.files[r.Num].Path()
		db.recs[r.Num] = r
	}
}
