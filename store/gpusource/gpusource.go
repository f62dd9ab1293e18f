// Package gpusource adapts a *store.SpanReader to gpu.Source, the byte
// source of a gpu.Prefetcher: a span's K or V factor block, addressed by
// gpu.SpanKey and verified against its CRC32C before it is handed over.
//
// It lives apart from both packages so that store never imports gpu (and
// with it the CUDA driver binding) and gpu never imports store; only a
// program that moves span factors to a device imports this package.
package gpusource

import (
	"context"
	"fmt"

	"github.com/kvstore/kvstore/gpu"
	"github.com/kvstore/kvstore/store"
)

// New returns r as a gpu.Source. Keys must name r's memory
// (SpanKey.Context == r.ID()); others are store.ErrNotFound. Spans that
// are not factored, and out-of-range layers, heads or spans, are
// store.ErrInvalidArgument. The source is valid until r is released.
func New(r *store.SpanReader) gpu.Source { return source{r} }

// source is the adapter; it holds nothing but the reader.
type source struct{ r *store.SpanReader }

func (s source) check(key gpu.SpanKey) error {
	if key.Context != [32]byte(s.r.ID()) {
		return fmt.Errorf("%w: span %v: not in span memory %s", store.ErrNotFound, key, s.r.ID().Short())
	}
	return nil
}

// SpanSize is the factor block's length, from the head record alone.
func (s source) SpanSize(key gpu.SpanKey) (int, error) {
	if err := s.check(key); err != nil {
		return 0, err
	}
	return s.r.FactorSize(int(key.Layer), int(key.Head), int(key.Span), key.Kind)
}

// ReadSpan copies the verified block into dst. A read of one block is
// short; ctx is checked before it starts.
func (s source) ReadSpan(ctx context.Context, key gpu.SpanKey, dst []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.check(key); err != nil {
		return err
	}
	return s.r.ReadFactors(dst, int(key.Layer), int(key.Head), int(key.Span), key.Kind)
}
