//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp

import (
	"context"
	"fmt"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/gguf"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store"
)

// Embeddings is a model's token embedding matrix, [Vocab][Dim] float32,
// read from its GGUF (TokenEmbeddings): libllama 0.5.0 has no getter for
// a token's input embedding, and a KV Packet adapter's prefill feeds the
// document as embeddings between the adapter's rows.
type Embeddings struct {
	Dim, Vocab int
	Rows       []float32
}

// TokenEmbeddings reads tensor token_embd.weight of m's GGUF (F32, F16 or
// BF16; a quantized table is ErrInvalidArgument).
func (m *Model) TokenEmbeddings() (*Embeddings, error) {
	f, closeFile, err := gguf.Open(m.path)
	if err != nil {
		return nil, fmt.Errorf("%w: token embeddings: %v", ErrInvalidArgument, err)
	}
	defer closeFile()
	for i, t := range f.Tensors {
		if t.Name != "token_embd.weight" {
			continue
		}
		dt := map[gguf.GGMLType]format.DType{gguf.GGMLF32: format.DTypeF32, gguf.GGMLF16: format.DTypeF16, gguf.GGMLBF16: format.DTypeBF16}[t.Type]
		if dt == 0 || len(t.Dims) != 2 || int(t.Dims[0]) != m.Embd || int(t.Dims[1]) != m.Vocab {
			return nil, fmt.Errorf("%w: token_embd.weight of ggml type %d, dims %v (model: %d x %d)", ErrInvalidArgument, t.Type, t.Dims, m.Embd, m.Vocab)
		}
		b, err := f.TensorData(i)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
		}
		e := &Embeddings{Dim: m.Embd, Vocab: m.Vocab, Rows: make([]float32, m.Embd*m.Vocab)}
		if err := format.ToF32(e.Rows, b, dt); err != nil {
			return nil, fmt.Errorf("%w: token_embd.weight: %v", ErrInvalidArgument, err)
		}
		return e, nil
	}
	return nil, fmt.Errorf("%w: %s has no token_embd.weight", ErrInvalidArgument, m.path)
}

// AppendRows appends the embedding rows of tokens to dst.
func (e *Embeddings) AppendRows(dst []float32, tokens []uint32) ([]float32, error) {
	for i, t := range tokens {
		if int(t) >= e.Vocab {
			return dst, fmt.Errorf("%w: token %d at index %d outside vocab [0, %d)", ErrInvalidArgument, t, i, e.Vocab)
		}
		dst = append(dst, e.Rows[int(t)*e.Dim:(int(t)+1)*e.Dim]...)
	}
	return dst, nil
}

// AdapterModel is sequence Seq of a llama.cpp context as an
// adapter.Model: input embeddings from the GGUF's token_embd.weight
// (Embeddings), PrefillEmbeddings by llama_decode of input embeddings
// (Context.DecodeEmbd) into the emptied sequence, the KV read back from
// the sequence's state as Save reads it, in float32, and RoPE the GGUF's
// (Model.Spec), the rotation store.Assemble applies to its packets. The
// sequence holds the last prefill's cells afterwards. Like its Context,
// it is not safe for concurrent use.
type AdapterModel struct {
	lc   *Context
	seq  int
	emb  *Embeddings
	rope *reconstruct.RoPE
	// EmbeddingStats of emb, computed at the first call.
	mean, std []float64
}

var _ adapter.Model = (*AdapterModel)(nil)

// NewAdapterModel returns sequence seq of lc as an adapter.Model. emb is
// the model's token embeddings (Model.TokenEmbeddings, read once and
// shared by any number of AdapterModels); nil reads them.
func NewAdapterModel(lc *Context, seq int, emb *Embeddings) (*AdapterModel, error) {
	if !lc.seqOK(seq) {
		return nil, lc.badSeq("adapter model", seq)
	}
	if emb == nil {
		var err error
		if emb, err = lc.m.TokenEmbeddings(); err != nil {
			return nil, err
		}
	}
	if emb.Dim != lc.m.Embd || emb.Vocab <= 0 || len(emb.Rows) != emb.Dim*emb.Vocab {
		return nil, fmt.Errorf("%w: adapter model: embeddings of %d x %d (%d values) for a model of width %d", ErrInvalidArgument, emb.Vocab, emb.Dim, len(emb.Rows), lc.m.Embd)
	}
	spec, err := lc.m.Spec(lc.opts.Cache)
	if err != nil {
		return nil, err
	}
	r, err := reconstruct.NewRoPE(spec.RoPE, spec.HeadDim)
	if err != nil {
		return nil, fmt.Errorf("%w: adapter model: %v", ErrInvalidArgument, err)
	}
	return &AdapterModel{lc: lc, seq: seq, emb: emb, rope: r}, nil
}

// EmbeddingDim is the model's n_embd.
func (am *AdapterModel) EmbeddingDim() int { return am.emb.Dim }

// AppendEmbeddings appends the embedding rows of tokens to dst; a token
// outside the vocabulary is ErrInvalidArgument.
func (am *AdapterModel) AppendEmbeddings(dst []float32, tokens []int) ([]float32, error) {
	e := am.emb
	for i, t := range tokens {
		if t < 0 || t >= e.Vocab {
			return dst, fmt.Errorf("%w: token %d at index %d outside vocab [0, %d)", ErrInvalidArgument, t, i, e.Vocab)
		}
	}
	for _, t := range tokens {
		dst = append(dst, e.Rows[t*e.Dim:(t+1)*e.Dim]...)
	}
	return dst, nil
}

// EmbeddingStats is adapter.ColumnStats of the token embedding matrix.
func (am *AdapterModel) EmbeddingStats() (mean, std []float64) {
	if am.mean == nil {
		am.mean, am.std = adapter.ColumnStats(am.emb.Rows, am.emb.Dim)
	}
	return append([]float64(nil), am.mean...), append([]float64(nil), am.std...)
}

// RoPE is the rotation of the model's keys, from its GGUF.
func (am *AdapterModel) RoPE() *reconstruct.RoPE { return am.rope }

// PrefillEmbeddings empties the sequence, decodes the rows of x from
// position 0 (in batches of the context's Batch rows) and returns the
// cells' keys and values, [KVHeads][rows][HeadDim] float32 per layer (an
// F16 cache's values converted).
func (am *AdapterModel) PrefillEmbeddings(x []float32) (k, v [][]float32, err error) {
	lc, d := am.lc, am.emb.Dim
	if len(x) == 0 || len(x)%d != 0 {
		return nil, nil, fmt.Errorf("%w: prefill of %d values, not rows of %d", ErrInvalidArgument, len(x), d)
	}
	n := len(x) / d
	if n > lc.Cells() {
		return nil, nil, fmt.Errorf("%w: prefill of %d rows in a context of %d cells", ErrInvalidArgument, n, lc.Cells())
	}
	lc.Remove(am.seq, -1, -1)
	for lo := 0; lo < n; lo += lc.opts.Batch {
		hi := min(lo+lc.opts.Batch, n)
		if err := lc.DecodeEmbd(am.seq, lo, x[lo*d:hi*d]); err != nil {
			return nil, nil, fmt.Errorf("llamacpp: prefill: %w", err)
		}
	}
	c, err := readCells(lc, am.seq)
	if err != nil {
		return nil, nil, fmt.Errorf("llamacpp: prefill of sequence %d: %w", am.seq, err)
	}
	if len(c.pos) != n || c.pos[0] != 0 {
		return nil, nil, fmt.Errorf("%w: prefill of %d rows left %d cells from position %d", ErrState, n, len(c.pos), c.pos[0])
	}
	k, v = make([][]float32, len(c.k)), make([][]float32, len(c.v))
	for l := range c.k {
		k[l], v[l] = make([]float32, len(c.k[l])/c.spec.DType.Size()), make([]float32, len(c.v[l])/c.spec.DType.Size())
		if err := format.ToF32(k[l], c.k[l], c.spec.DType); err != nil {
			return nil, nil, err
		}
		if err := format.ToF32(v[l], c.v[l], c.spec.DType); err != nil {
			return nil, nil, err
		}
	}
	return k, v, nil
}

// SaveAdapter prefills the document tokens alone in sequence seq of lc
// (whatever it held is removed) as KV Packet does, through the generic
// path: adapter.Packet of NewAdapterModel(lc, seq, emb), then db.Put. The
// cells are decoded from position 0 as input embeddings [a's header; the
// tokens' rows of emb; a's trailer], and the packet names adapter
// adapterID (HeaderTokens and TrailerTokens set, TokenIDs the
// document's). The store must hold the adapter under adapterID for the
// model's Spec (adapter.Put), as store.Put requires. With a.HideHeader the
// header's rows are dropped and the keys re-rotated to start at 0
// (HeaderTokens 0), as adapter.Prefill does. A nil a is Save of the plain
// prefill (no adapter rows).
func SaveAdapter(ctx context.Context, db *store.DB, ns string, lc *Context, seq int, tokens []uint32, emb *Embeddings, a *adapter.Adapter, adapterID string) (format.PacketID, error) {
	var id format.PacketID
	if !lc.seqOK(seq) {
		return id, lc.badSeq("save adapter", seq)
	}
	if len(tokens) == 0 || emb == nil || emb.Dim != lc.m.Embd || (a != nil && (a.Dim != lc.m.Embd || adapterID == "")) {
		return id, fmt.Errorf("%w: save adapter: %d tokens, embeddings %v, adapter %q for a model of width %d", ErrInvalidArgument, len(tokens), emb != nil, adapterID, lc.m.Embd)
	}
	am, err := NewAdapterModel(lc, seq, emb)
	if err != nil {
		return id, fmt.Errorf("llamacpp: save adapter: %w", err)
	}
	spec, err := lc.m.Spec(lc.opts.Cache)
	if err != nil {
		return id, err
	}
	doc := make([]int, len(tokens))
	for i, t := range tokens {
		if int64(t) >= int64(emb.Vocab) {
			return id, fmt.Errorf("%w: save adapter: token %d at index %d outside vocab [0, %d)", ErrInvalidArgument, t, i, emb.Vocab)
		}
		doc[i] = int(t)
	}
	p, err := adapter.Packet(am, spec, ns, adapterID, a, doc)
	if err != nil {
		return id, fmt.Errorf("llamacpp: save adapter: %w", err)
	}
	if id, err = db.Put(ctx, p); err != nil {
		return id, fmt.Errorf("llamacpp: save adapter: %w", err)
	}
	return id, nil
}
