package quality

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store"
)

// Config is one measurement.
type Config struct {
	// Name labels the model in reports, e.g. "stories260K".
	Name  string
	Model *llama.Model
	// Context (N) and Continuation (T) are the prefilled and the held-out
	// decoded token counts; both sampled from the model, the context
	// starting with token BOS.
	Context, Continuation int
	BOS                   int
	// Budgets are the GPU budgets as fractions of the context's KV.
	Budgets []float64
	// Ranks are the fixed ranks of the reconstruction-error sweep; those
	// above the head dim are dropped.
	Ranks []int
	// Segment configures the segmentation (defaults: SeKV's alpha = 1,
	// spans of 16 to 512 tokens).
	Segment segment.Options
	// Energy is the SVD energy threshold of the stored factors (0: the
	// default 0.99; 1: always r_max). MaxRank is r_max (0: 32).
	Energy  float64
	MaxRank int
	// FactorDType is the stored factors' dtype (0: f16, the store's
	// default; SeKV keeps f32).
	FactorDType format.DType
	// RowDType is the model spec's dtype the memory is built for, and so
	// its resident rows' and the size rule's raw rows' (0: f32, the lab
	// model's arithmetic; bf16 rounds the resident rows).
	RowDType format.DType
	// SizeRule builds span memory with the store's rule: a span keeps its
	// factors only where that makes the memory smaller (and they take less
	// room than its rows in bf16), and a memory larger than its rows is
	// refused (store.ErrSpanNotSmaller: the context is left out). Off,
	// every span the segmentation factors is factored, as in SeKV: the
	// random and small models measured here have rows that do not
	// compress, and their spans would all stay resident.
	SizeRule bool
	// RawSpans, with SizeRule, keeps the spans left unfactored as the
	// segmentation cut them (store.SpanOptions.KeepResidentSpans) rather
	// than one span per run of them, so that the raw zoom moves their rows
	// span by span, as it zooms factored spans; a run is often longer
	// than a retrieval head's zoom budget.
	RawSpans bool
	// RouteRaw, with SizeRule, has SeKV's routers score the spans left
	// unfactored too, by their summary keys, so that span+trained and the
	// other router-zoomed methods move their rows as the raw zoom moves
	// them for span+anchor. Off, the store's Routing scores factored
	// spans only (an unfactored span is resident on the GPU in the store's
	// design) and a router never zooms one.
	RouteRaw bool
	// ResidentTail keeps the spans holding the context's last
	// ResidentTail of its tokens unfactored
	// (store.SpanOptions.ResidentTail), so that a window of recent rows
	// read from the memory (span+heads' streaming heads) is exact; 0:
	// none. Within [0, 1].
	ResidentTail float64
	// AnchorShare bounds the resident anchors to this fraction of the
	// budget (0: 0.5).
	AnchorShare float64
	// HeadRank, when set, is stored as the model's per (layer, KV head)
	// factor rank (store.ArtifactRank; 0: chosen by Energy): span+heads'
	// streaming heads never zoom, so their factors can be kept small and
	// the room left to the retrieval heads'.
	HeadRank []float32
	// Tau, when SetTau, is stored as every (layer, KV head)'s zoom
	// threshold (ArtifactTau); otherwise the default 0.05 applies.
	Tau    float32
	SetTau bool
	// Seed seeds the sampling of the text.
	Seed uint64
	// Text, when it holds at least Context+Continuation tokens, is the
	// context followed by the continuation (real text, e.g. GoText's
	// held-out Go test files) instead of a sample; BOS and Seed then do not
	// pick the text.
	Text []int
}

// Defaults of Config fields left zero.
const (
	DefaultAnchorShare = 0.5
	sinks              = 4
)

func (c *Config) ensureDefaults() {
	if c.AnchorShare == 0 {
		c.AnchorShare = DefaultAnchorShare
	}
	if c.FactorDType == 0 {
		c.FactorDType = store.DefaultSpanFactorDType
	}
	if c.RowDType == 0 {
		c.RowDType = format.DTypeF32
	}
}

func (c *Config) validate() error {
	switch {
	case c.Model == nil:
		return fmt.Errorf("%w: quality: no model", format.ErrInvalidArgument)
	case c.Context < 2*sinks || c.Continuation < 1:
		return fmt.Errorf("%w: quality: context %d, continuation %d", format.ErrInvalidArgument, c.Context, c.Continuation)
	case c.BOS < 0 || c.BOS >= c.Model.Vocab:
		return fmt.Errorf("%w: quality: BOS %d outside the vocab", format.ErrInvalidArgument, c.BOS)
	case !(c.AnchorShare > 0 && c.AnchorShare <= 1):
		return fmt.Errorf("%w: quality: anchor share %v", format.ErrInvalidArgument, c.AnchorShare)
	case !(c.ResidentTail >= 0 && c.ResidentTail <= 1):
		return fmt.Errorf("%w: quality: resident tail %v", format.ErrInvalidArgument, c.ResidentTail)
	}
	for _, f := range c.Budgets {
		if !(f > 0 && f <= 1) {
			return fmt.Errorf("%w: quality: budget %v not in (0, 1]", format.ErrInvalidArgument, f)
		}
	}
	return nil
}

// RandomHD128 is the random-weight model of the measurements: two layers
// of four query heads over two KV heads of 128 dims (Llama's head), llama3
// RoPE scaling. Random weights give near-isotropic keys and values, the
// hard case for low rank.
var RandomHD128 = llama.Config{Dim: 512, Hidden: 1024, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 512, SeqLen: 131072,
	NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
		Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}}
