package adapter

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
	"github.com/kvstore/kvstore/reconstruct"
)

// Adapter is a KV Packet adapter for one model: Header and Trailer hold
// HeaderRows() and TrailerRows() rows of Dim float32 values, flat.
type Adapter struct {
	Dim             int
	Header, Trailer []float32
	// TrainConfig is how the adapter was trained, JSON (free form; written
	// to safetensors as "train_config"). Empty when unknown.
	TrainConfig string
	// HideHeader: the header is a prefill-only context. Prefill runs
	// [header; doc; trailer] but keeps only the document's and trailer's
	// rows (re-rotated to start at position 0), so a packet holds
	// len(doc) + N_t rows and the question never attends to the header.
	// Written to safetensors as MetaHideHeader = "true".
	HideHeader bool
}

// MetaHideHeader is the safetensors __metadata__ key of HideHeader.
const MetaHideHeader = "kvstore_hide_header"

// StoredHeaderRows is the header rows a packet of a holds: HeaderRows(),
// or 0 when the header is hidden (and 0 for a nil adapter).
func (a *Adapter) StoredHeaderRows() int {
	if a == nil || a.HideHeader {
		return 0
	}
	return a.HeaderRows()
}

// HeaderRows is N_h.
func (a *Adapter) HeaderRows() int { return len(a.Header) / a.Dim }

// TrailerRows is N_t.
func (a *Adapter) TrailerRows() int { return len(a.Trailer) / a.Dim }

// Bytes is the size of the adapter's values in float32.
func (a *Adapter) Bytes() int { return 4 * (len(a.Header) + len(a.Trailer)) }

// Init returns an untrained adapter for m with nh header and nt trailer
// rows, drawn as KV Packet does from the token embedding matrix's
// statistics (Model.EmbeddingStats): value j of each row from
// N(mean_j, std_j) of column j. The same statistics, sizes and seed give
// the same adapter.
func Init(m Model, nh, nt int, seed uint64) (*Adapter, error) {
	if nh < 0 || nt < 0 || nh > 1<<16 || nt > 1<<16 {
		return nil, fmt.Errorf("%w: adapter: %d header and %d trailer rows", format.ErrInvalidArgument, nh, nt)
	}
	d := m.EmbeddingDim()
	mean, std := m.EmbeddingStats()
	if d <= 0 || len(mean) != d || len(std) != d {
		return nil, fmt.Errorf("%w: adapter: embedding statistics of %d and %d columns for a model of width %d",
			format.ErrInvalidArgument, len(mean), len(std), d)
	}
	rng := rand.New(rand.NewPCG(seed, 0x6b7670)) // "kvp"
	draw := func(rows int) []float32 {
		x := make([]float32, rows*d)
		for i := range x {
			j := i % d
			x[i] = float32(mean[j] + std[j]*rng.NormFloat64())
		}
		return x
	}
	return &Adapter{Dim: d, Header: draw(nh), Trailer: draw(nt)}, nil
}

// InitToken returns an untrained adapter for m that starts as a
// context the model knows: every header row is token bos's input
// embedding (a packet then begins as a sequence does, with the model's
// attention sink) and every trailer row the mean embedding row (a
// neutral token), with HideHeader set. Trained from here, an adapter
// starts near what the plain prefill after BOS gives instead of from
// random rows the model has never seen.
func InitToken(m Model, nh, nt, bos int) (*Adapter, error) {
	if nh < 0 || nt < 0 || nh > 1<<16 || nt > 1<<16 {
		return nil, fmt.Errorf("%w: adapter: %d header and %d trailer rows", format.ErrInvalidArgument, nh, nt)
	}
	if _, err := m.AppendEmbeddings(nil, []int{bos}); err != nil {
		return nil, err
	}
	text := make([]int, nh)
	for i := range text {
		text[i] = bos
	}
	return initHidden(m, text, nt)
}

// InitText returns an untrained adapter for m whose hidden header is the
// input embeddings of text, one row per token, and whose nt trailer rows
// are the mean embedding row: every document is prefilled after the same
// text, whose rows are then dropped (HideHeader), so a cut from the middle
// of a file starts in a context like the one it was cut from. The header
// costs len(text) rows of prefill per document and no stored row.
func InitText(m Model, text []int, nt int) (*Adapter, error) {
	if len(text) == 0 || len(text) > 1<<16 || nt < 0 || nt > 1<<16 {
		return nil, fmt.Errorf("%w: adapter: a header text of %d tokens and %d trailer rows", format.ErrInvalidArgument, len(text), nt)
	}
	return initHidden(m, text, nt)
}

// initHidden is the adapter whose hidden header rows are text's input
// embeddings and whose nt trailer rows are the mean embedding row.
func initHidden(m Model, text []int, nt int) (*Adapter, error) {
	d := m.EmbeddingDim()
	mean, _ := m.EmbeddingStats()
	if d <= 0 || len(mean) != d {
		return nil, fmt.Errorf("%w: adapter: statistics of %d values for a model of width %d", format.ErrInvalidArgument, len(mean), d)
	}
	a := &Adapter{Dim: d, Header: make([]float32, 0, len(text)*d), Trailer: make([]float32, nt*d), HideHeader: true}
	var err error
	if a.Header, err = m.AppendEmbeddings(a.Header, text); err != nil {
		return nil, err
	}
	if len(a.Header) != len(text)*d {
		return nil, fmt.Errorf("%w: adapter: %d embedding values for %d tokens of width %d", format.ErrInvalidArgument, len(a.Header), len(text), d)
	}
	for i := range a.Trailer {
		a.Trailer[i] = float32(mean[i%d])
	}
	return a, nil
}

// check verifies a fits m.
func (a *Adapter) check(m Model) error {
	if a.Dim <= 0 || a.Dim != m.EmbeddingDim() || len(a.Header)%a.Dim != 0 || len(a.Trailer)%a.Dim != 0 {
		return fmt.Errorf("%w: adapter of %d and %d values, %d wide, for a model of width %d",
			format.ErrInvalidArgument, len(a.Header), len(a.Trailer), a.Dim, m.EmbeddingDim())
	}
	return nil
}

// Rows returns the input embeddings [header; doc; trailer] of doc, flat
// (rows of m.EmbeddingDim() values): what Prefill runs. A nil adapter
// adds no rows.
func (a *Adapter) Rows(m Model, doc []int) ([]float32, error) {
	if len(doc) == 0 {
		return nil, fmt.Errorf("%w: adapter: a document of no tokens", format.ErrInvalidArgument)
	}
	if a == nil {
		return m.AppendEmbeddings(nil, doc)
	}
	if err := a.check(m); err != nil {
		return nil, err
	}
	x := make([]float32, 0, len(a.Header)+len(doc)*a.Dim+len(a.Trailer))
	x = append(x, a.Header...)
	x, err := m.AppendEmbeddings(x, doc)
	if err != nil {
		return nil, err
	}
	if len(x) != len(a.Header)+len(doc)*a.Dim {
		return nil, fmt.Errorf("%w: adapter: the model gave %d embedding values for %d tokens of width %d",
			format.ErrInvalidArgument, len(x)-len(a.Header), len(doc), a.Dim)
	}
	return append(x, a.Trailer...), nil
}

// Prefill prefills doc alone from position 0 as [header; doc; trailer]
// (Model.PrefillEmbeddings of Rows) and returns the packet's KV: its
// N_h + len(doc) + N_t rows, or with HideHeader its len(doc) + N_t rows,
// the header's dropped and the keys re-rotated by -N_h with m.RoPE()
// (reconstruct.ShiftF32) to positions 0, 1, ... A nil adapter prefills the
// document alone.
func (a *Adapter) Prefill(m Model, doc []int) (*KV, error) {
	x, err := a.Rows(m, doc)
	if err != nil {
		return nil, err
	}
	kv, err := prefill(m, x)
	if err != nil {
		return nil, err
	}
	if a != nil && a.HideHeader && a.HeaderRows() > 0 {
		nh := a.HeaderRows()
		kv = kv.from(nh)
		for l := range kv.K {
			if err := reconstruct.ShiftF32(kv.K[l], kv.K[l], m.RoPE(), kv.KVHeads, kv.Rows(), -int64(nh)); err != nil {
				return nil, fmt.Errorf("adapter: hiding the header: %w", err)
			}
		}
	}
	return kv, nil
}

// Encode returns a's safetensors file (dtype F32, or BF16).
func (a *Adapter) Encode(dt safetensors.DType) ([]byte, error) {
	meta := map[string]string{}
	if a.TrainConfig != "" {
		meta[safetensors.MetaTrainConfig] = a.TrainConfig
	}
	if a.HideHeader {
		meta[MetaHideHeader] = "true"
	}
	f, err := safetensors.EncodeAdapter(&safetensors.Adapter{Hidden: a.Dim, Header: a.Header, Trailer: a.Trailer, Metadata: meta}, dt)
	if err != nil {
		return nil, err
	}
	return safetensors.Encode(f)
}

// Decode reads an adapter from a safetensors file (F32, BF16 or F16
// tensors "header" and "trailer"); its errors wrap format.ErrCorruption.
func Decode(b []byte) (*Adapter, error) {
	f, err := safetensors.Decode(b)
	if err != nil {
		return nil, err
	}
	return fromFile(f)
}

// fromFile is the adapter in a decoded safetensors file.
func fromFile(f *safetensors.File) (*Adapter, error) {
	s, err := safetensors.DecodeAdapter(f)
	if err != nil {
		return nil, err
	}
	return &Adapter{Dim: s.Hidden, Header: s.Header, Trailer: s.Trailer, TrainConfig: s.Metadata[safetensors.MetaTrainConfig],
		HideHeader: s.Metadata[MetaHideHeader] == "true"}, nil
}

// ID is a content id of a: "kvp-" and the first 16 hex digits of the
// SHA-256 of its values (float32 bits, header then trailer), shape and
// HideHeader, so that two different adapters never share packet ids.
func (a *Adapter) ID() string {
	h := sha256.New()
	fmt.Fprintf(h, "kv-packet-adapter/1 %d %d %d\n", a.Dim, len(a.Header), len(a.Trailer))
	if a.HideHeader {
		fmt.Fprintf(h, "hide-header\n")
	}
	var b [4]byte
	for _, x := range [][]float32{a.Header, a.Trailer} {
		for _, v := range x {
			u := math.Float32bits(v)
			b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
			h.Write(b[:])
		}
	}
	return "kvp-" + hex.EncodeToString(h.Sum(nil)[:8])
}
