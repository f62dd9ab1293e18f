//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp

import (
	"context"
	"fmt"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/gguf"
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

// SaveAdapter prefills the document tokens alone in sequence seq of lc
// (whatever it held is removed) as KV Packet does: from position 0, as
// input embeddings [a's header; the tokens' rows of emb; a's trailer], and
// stores the cells as one packet of adapter id adapterID (HeaderTokens
// and TrailerTokens set, TokenIDs the document's). The store must hold the
// adapter under adapterID for the model's Spec (adapter.Put), as store.Put
// requires. With a.HideHeader the header's cells are removed before the
// save (HeaderTokens 0), as adapter.Prefill drops them. A nil a is Save of
// the plain prefill (no adapter rows).
func SaveAdapter(ctx context.Context, db *store.DB, ns string, lc *Context, seq int, tokens []uint32, emb *Embeddings, a *adapter.Adapter, adapterID string) (format.PacketID, error) {
	var id format.PacketID
	if !lc.seqOK(seq) {
		return id, lc.badSeq("save adapter", seq)
	}
	if len(tokens) == 0 || emb == nil || emb.Dim != lc.m.Embd || (a != nil && (a.Dim != lc.m.Embd || adapterID == "")) {
		return id, fmt.Errorf("%w: save adapter: %d tokens, embeddings %v, adapter %q for a model of width %d", ErrInvalidArgument, len(tokens), emb != nil, adapterID, lc.m.Embd)
	}
	var x []float32
	nh, nt := 0, 0
	if a != nil {
		nh, nt = a.HeaderRows(), a.TrailerRows()
		x = append(x, a.Header...)
	}
	x, err := emb.AppendRows(x, tokens)
	if err != nil {
		return id, err
	}
	if a != nil {
		x = append(x, a.Trailer...)
	} else {
		adapterID = ""
	}
	lc.Remove(seq, -1, -1)
	if err := lc.DecodeEmbd(seq, 0, x); err != nil {
		return id, fmt.Errorf("llamacpp: save adapter: %w", err)
	}
	if a != nil && a.HideHeader && nh > 0 {
		// The header is a prefill-only context: its cells go, and Put
		// rotates the rest from position nh back to 0.
		if !lc.Remove(seq, 0, nh) {
			return id, fmt.Errorf("%w: save adapter: removing %d header cells: %s", ErrLlama, nh, lc.lib.takeLog())
		}
		nh = 0
	}
	return save(ctx, db, ns, lc, seq, packetRows{tokens: tokens, adapterID: adapterID, header: nh, trailer: nt})
}
