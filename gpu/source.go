package gpu

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"fmt"

	"github.com/kvstore/kvstore/format"
)

// SpanKey names one factor block: the truncated SVD factors of one span's
// keys or values in one (layer, KV head) of one long context.
type SpanKey struct {
	// Context identifies the long context (the store chooses: e.g. the
	// BLAKE3 id it gave the context's span memory).
	Context [32]byte
	Layer   int32
	Head    int32
	Span    int32
	Kind    format.ChunkKind // K or V
}

func (k SpanKey) String() string {
	return fmt.Sprintf("%s/L%d/H%d/S%d/%v", hex.EncodeToString(k.Context[:8]), k.Layer, k.Head, k.Span, k.Kind)
}

// compareKeys orders keys by context, layer, head, span and kind (a span's
// K before its V), for the prefetcher's tie-breaks.
func compareKeys(a, b SpanKey) int {
	return cmp.Or(bytes.Compare(a.Context[:], b.Context[:]), cmp.Compare(a.Layer, b.Layer),
		cmp.Compare(a.Head, b.Head), cmp.Compare(a.Span, b.Span), cmp.Compare(a.Kind, b.Kind))
}

// Source is where the prefetcher reads factor blocks from; the store
// implements it over its span memory. Both methods are called concurrently
// from several goroutines.
type Source interface {
	// SpanSize is the byte length of key's factors as
	// reconstruct.AppendFactors encodes them, without reading them.
	// Unknown keys give an error (wrapping the store's ErrNotFound).
	SpanSize(key SpanKey) (int, error)
	// ReadSpan fills dst, exactly SpanSize(key) bytes of pinned host
	// memory, with that encoding, verified (the store checks its CRCs).
	// It returns ctx's error promptly once ctx is done and never keeps
	// dst after returning.
	ReadSpan(ctx context.Context, key SpanKey, dst []byte) error
}

// Request asks for a span, with its routing score for the coming decode
// steps (SeKV's alpha = sigmoid(W q . s), or any larger-is-more-wanted
// score).
type Request struct {
	Key   SpanKey
	Score float32
}
