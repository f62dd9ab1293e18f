package store

import "github.com/kvstore/kvstore/format"

// Span memory records, catalog values of kind "KVSP", one root (SpanMeta)
// per context and one HeadMeta per (layer, KV head), are drawn and coded
// in format/span_meta.go and format/span_head.go. The names below keep
// those public types reachable from the store; go doc of package format
// shows their fields.
type (
	// SpanMeta is the root record of a context's span memory.
	SpanMeta = format.SpanMeta
	// HeadMeta is the record of one (layer, KV head).
	HeadMeta = format.HeadMeta
	// ResidentBlock locates one layer's resident rows in the extent.
	ResidentBlock = format.ResidentBlock
	// FactorBlock locates one span's K or V factors in the extent.
	FactorBlock = format.FactorBlock
)
