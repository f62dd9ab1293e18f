// Package llama is a small, readable reference Llama forward pass in pure
// Go, for kvstore's tests, examples and demos. It is not fast and not meant
// for serving.
//
// It runs real llama2.c checkpoints (Load; the stories260K test model is
// found by internal/testenv) and deterministic random-weight models of any
// Llama shape (Random): RMSNorm, grouped-query attention with rotary
// embeddings from package reconstruct (so the model and reconstruct.Shift
// share one definition of RoPE), SwiGLU feed-forward, and an optional tied
// classifier. Forward prefills or continues over a Cache whose rows may sit
// at arbitrary positions, as an assembled cache of stored packets does.
//
// ForwardEmbeddings prefills from input embeddings instead of token ids
// (KV Packet's adapter rows: soft tokens before and after a document).
// PacketLoss is a float64 second forward pass with a hand-written backward
// pass (grad64.go): the distillation loss of KV Packet adapters and its
// gradient with respect to the header and trailer rows, the weights frozen,
// through RMSNorm, grouped-query attention with RoPE (and the re-rotation
// of packet keys at assembly), SwiGLU and the residuals; tests check it
// against central finite differences.
//
// Math is float32, accumulated in the order llama2.c's run.c uses; RoPE
// angles come from reconstruct (float64 angles, float32 cos and sin).
// Errors wrap format.ErrInvalidArgument (bad shapes, tokens, caches) or
// format.ErrCorruption (a malformed checkpoint file).
package llama

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// Config is the shape of a Llama model.
type Config struct {
	Dim     int // width of the residual stream; Heads * head dim
	Hidden  int // width of the SwiGLU feed-forward layer
	Layers  int
	Heads   int // query heads
	KVHeads int // key/value heads; Heads is a multiple of it
	Vocab   int
	SeqLen  int // context the model was trained for; informational, not enforced
	RoPE    format.RoPE
	NormEps float32 // RMSNorm epsilon
}

// HeadDim is Dim / Heads.
func (c Config) HeadDim() int { return c.Dim / c.Heads }

// KVDim is the width of one token's keys (or values) in one layer.
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim() }

// maxConfigDim bounds every size of a Config so that products of two stay
// far from overflow and a hostile header cannot ask for huge allocations.
const maxConfigDim = 1 << 20

// Validate checks that c describes a runnable model.
func (c Config) Validate() error {
	bad := func(msg string, args ...any) error {
		return fmt.Errorf("%w: llama: config: %s", format.ErrInvalidArgument, fmt.Sprintf(msg, args...))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"dim", c.Dim}, {"hidden", c.Hidden}, {"layers", c.Layers}, {"heads", c.Heads},
		{"kv heads", c.KVHeads}, {"vocab", c.Vocab}, {"seq len", c.SeqLen}} {
		if f.v <= 0 || f.v > maxConfigDim {
			return bad("%s %d not in [1, %d]", f.name, f.v, maxConfigDim)
		}
	}
	switch {
	case c.Dim%c.Heads != 0:
		return bad("dim %d not a multiple of heads %d", c.Dim, c.Heads)
	case c.Heads%c.KVHeads != 0:
		return bad("heads %d not a multiple of kv heads %d", c.Heads, c.KVHeads)
	case !(c.NormEps > 0):
		return bad("norm eps %v must be > 0", c.NormEps)
	}
	if _, err := reconstruct.NewRoPE(c.RoPE, c.HeadDim()); err != nil {
		return fmt.Errorf("llama: config: %w", err)
	}
	return nil
}

// Model is a Llama with its weights in memory, row-major [out][in] as
// llama2.c stores them. It is immutable after construction and safe for
// concurrent Forward calls on distinct caches.
type Model struct {
	Config
	rope       *reconstruct.RoPE
	invFreq    []float64 // rope.InvFreq(), for the float64 path
	embed      []float32 // [Vocab][Dim]
	layers     []layerWeights
	normOut    []float32 // [Dim]
	classifier []float32 // [Vocab][Dim]; the same slice as embed when tied
}

type layerWeights struct {
	attnNorm []float32 // [Dim]
	wq       []float32 // [Dim][Dim]
	wk, wv   []float32 // [KVDim][Dim]
	wo       []float32 // [Dim][Dim]
	ffnNorm  []float32 // [Dim]
	w1, w3   []float32 // [Hidden][Dim]
	w2       []float32 // [Dim][Hidden]
}

// RoPE is the rotary embedding the model applies to queries and keys.
func (m *Model) RoPE() *reconstruct.RoPE { return m.rope }

// Spec is the KV layout the model produces, for a store holding its
// packets in dtype under the given weights id.
func (m *Model) Spec(dtype format.DType, weightsID string) *format.ModelSpec {
	return &format.ModelSpec{
		Architecture: "llama",
		Layers:       m.Layers,
		KVHeads:      m.KVHeads,
		HeadDim:      m.HeadDim(),
		DType:        dtype,
		RoPE:         m.RoPE().Config(),
		WeightsID:    weightsID,
	}
}

// newModel allocates the weights of cfg in one block, in llama2.c order.
func newModel(cfg Config, tied bool) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rope, err := reconstruct.NewRoPE(cfg.RoPE, cfg.HeadDim())
	if err != nil {
		return nil, fmt.Errorf("llama: %w", err)
	}
	m := &Model{Config: cfg, rope: rope, invFreq: rope.InvFreq(), layers: make([]layerWeights, cfg.Layers)}
	m.embed = make([]float32, cfg.Vocab*cfg.Dim)
	d, kv, h := cfg.Dim, cfg.KVDim(), cfg.Hidden
	for l := range m.layers {
		w := &m.layers[l]
		w.attnNorm, w.ffnNorm = make([]float32, d), make([]float32, d)
		w.wq, w.wo = make([]float32, d*d), make([]float32, d*d)
		w.wk, w.wv = make([]float32, kv*d), make([]float32, kv*d)
		w.w1, w.w3, w.w2 = make([]float32, h*d), make([]float32, h*d), make([]float32, d*h)
	}
	m.normOut = make([]float32, d)
	m.classifier = m.embed
	if !tied {
		m.classifier = make([]float32, cfg.Vocab*d)
	}
	return m, nil
}

// tensors lists the weight tensors in llama2.c checkpoint order (all
// layers' attention norms, then all layers' wq, ...), the classifier last
// when it is not tied.
func (m *Model) tensors() [][]float32 {
	t := [][]float32{m.embed}
	for _, pick := range []func(*layerWeights) []float32{
		func(w *layerWeights) []float32 { return w.attnNorm },
		func(w *layerWeights) []float32 { return w.wq },
		func(w *layerWeights) []float32 { return w.wk },
		func(w *layerWeights) []float32 { return w.wv },
		func(w *layerWeights) []float32 { return w.wo },
		func(w *layerWeights) []float32 { return w.ffnNorm },
		func(w *layerWeights) []float32 { return w.w1 },
		func(w *layerWeights) []float32 { return w.w2 },
		func(w *layerWeights) []float32 { return w.w3 },
	} {
		for l := range m.layers {
			t = append(t, pick(&m.layers[l]))
		}
	}
	t = append(t, m.normOut)
	if &m.classifier[0] != &m.embed[0] {
		t = append(t, m.classifier)
	}
	return t
}
