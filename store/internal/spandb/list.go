package spandb

import (
	"fmt"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Info describes one stored span memory as its root record says, without
// reading its head records or its extent.
type Info struct {
	Namespace string
	Name      string
	Context   format.ContextID
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

// List calls fn with every span memory in cat, in catalog order
// (namespace, then name), stopping at the first error fn returns, which
// it returns. A root record that does not decode, or whose key does not
// name its context, stops the walk with format.ErrCorruption naming the
// key.
func List(cat *catalog.Catalog, fn func(Info) error) error {
	p := []byte{catalog.TagSpanMeta}
	return cat.Scan(p, catalog.PrefixEnd(p), func(k, v []byte) (bool, error) {
		ns, name, ok := catalog.ParseSpanMetaKey(k)
		m, err := format.DecodeSpanMeta(v)
		if err == nil && (!ok || m.Context != format.ComputeContextID(ns, m.Model, name)) {
			err = fmt.Errorf("%w: the key does not name the record's context", format.ErrCorruption)
		}
		if err != nil {
			return false, fmt.Errorf("store: span memory record under key %x: %w", k, err)
		}
		if err := fn(info(ns, name, m)); err != nil {
			return false, err
		}
		return true, nil
	})
}

// info summarises root record m of (ns, name).
func info(ns, name string, m *format.SpanMeta) Info {
	i := Info{Namespace: ns, Name: name, Context: m.Context, Model: m.Model,
		Tokens: m.Tokens, Spans: len(m.Spans), Anchors: len(m.Anchors), Resident: len(m.Resident),
		Layers: m.Layers, KVHeads: m.KVHeads, HeadDim: m.HeadDim, ProjDim: m.ProjDim,
		ResidentDType: m.ResidentDType, FactorDType: m.FactorDType, Projection: m.Projection,
		BlobFile: m.BlobFile, ExtentOffset: m.ExtentOffset, ExtentLength: m.ExtentLength,
		Created: time.Unix(0, m.CreatedUnixNs).UTC()}
	for _, s := range m.Spans {
		if s.Factored {
			i.Factored++
		}
	}
	return i
}

// Count counts the span memories in cat (their root records, undecoded).
func Count(cat *catalog.Catalog) (int64, error) {
	p := []byte{catalog.TagSpanMeta}
	n := int64(0)
	err := cat.Scan(p, catalog.PrefixEnd(p), func(k, v []byte) (bool, error) {
		n++
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: count span memories: %w", err)
	}
	return n, nil
}
