package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{name: "inspect", summary: "show a packet's or a span memory context's records, extent and model", args: "<packet-id|context-id>", long: inspectSummary, setup: setupInspect})
}

const inspectSummary = `Prints everything the catalog keeps about one packet or one span memory
context, found by a unique hex prefix (at least 4 digits) of its id among
packets and contexts together (a prefix matching both is ambiguous).

For a packet: identity (namespace, id, model fingerprint, adapter, token
counts, base position), shape and dtype, where its extent is (blob file,
offset, length), and each chunk's layer, K|V, shape, dtype, codec, offset,
stored and raw sizes and CRC32C; then the model spec. A pruned packet's
last chunk ("positions", u8) is the bitmap of its kept positions,
ceil(tokens/8) bytes per (layer, KV head).

For a context (kvstore ls --contexts lists them): identity (namespace,
name, context id, model fingerprint), tokens and base position, the
segmentation (spans, factored spans, anchors, resident rows, surprisal
threshold), the factor dtype and, per layer and KV head, the SVD ranks of
its K and V factors (min, mean, max over factored spans) and their bytes;
where its extent is and its bytes; then the model spec.`

// inspectOutput is inspect's JSON for a packet.
type inspectOutput struct {
	Kind          string      `json:"kind"` // "packet"
	ID            string      `json:"id"`
	Namespace     string      `json:"namespace"`
	Model         string      `json:"model"`
	AdapterID     string      `json:"adapter_id"`
	Version       uint16      `json:"format_version"`
	Tokens        uint32      `json:"tokens"`
	KeptTokens    uint32      `json:"kept_tokens,omitempty"` // > 0: pruned, rows kept per (layer, head)
	HeaderTokens  uint32      `json:"header_tokens"`
	TrailerTokens uint32      `json:"trailer_tokens"`
	TokenIDs      []uint32    `json:"token_ids"`
	BasePosition  int64       `json:"base_position"`
	Layers        uint32      `json:"layers"`
	KVHeads       uint32      `json:"kv_heads"`
	HeadDim       uint32      `json:"head_dim"`
	DType         string      `json:"dtype"`
	File          string      `json:"file"`
	ExtentOffset  uint64      `json:"extent_offset"`
	ExtentLength  uint64      `json:"extent_length"`
	Created       time.Time   `json:"created"`
	Chunks        []inspectCh `json:"chunks"`
	Spec          *specOutput `json:"model_spec"`
	SpecError     string      `json:"model_spec_error,omitempty"`
}

type inspectCh struct {
	Layer     uint32   `json:"layer"`
	Kind      string   `json:"kind"`
	Shape     []uint32 `json:"shape"`
	DType     string   `json:"dtype"`
	Codec     string   `json:"codec"`
	Offset    uint64   `json:"offset"`
	Length    uint64   `json:"length"`
	RawLength uint64   `json:"raw_length"`
	CRC32C    string   `json:"crc32c"`
}

// specOutput is a model spec in JSON and text.
type specOutput struct {
	Architecture string      `json:"architecture"`
	Layers       int         `json:"layers"`
	KVHeads      int         `json:"kv_heads"`
	HeadDim      int         `json:"head_dim"`
	DType        string      `json:"dtype"`
	WeightsID    string      `json:"weights_id"`
	RoPE         format.RoPE `json:"rope"`
}

func setupInspect(fs *pflag.FlagSet, e *env) verbFunc {
	ns := fs.String("ns", "", "look the id up in this namespace only")
	addrFlag(fs, e)
	return func(ctx context.Context, e *env, args []string) error { return runInspect(ctx, e, args, *ns) }
}

func runInspect(ctx context.Context, e *env, args []string, ns string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: want one packet or context id, got %d arguments", errUsage, len(args))
	}
	if err := checkIDs(args[0]); err != nil {
		return err
	}
	db, err := openStore(e, false)
	if err != nil {
		return err
	}
	defer db.Close()
	h, c, err := findTarget(db, args[0], ns)
	if err != nil {
		return err
	}
	if c != nil {
		return inspectContext(e, db, c)
	}
	out := inspectOf(h)
	out.File = blobPath(e, db, h.BlobFile)
	out.Spec, out.SpecError = specOf(db, h.Model)
	return output(e, out, out.text)
}

// blobPath is the path of blob file num.
func blobPath(e *env, db *store.DB, num uint32) string {
	for _, f := range db.BlobFiles() {
		if f.Num == num {
			return f.Path
		}
	}
	return filepath.Join(e.dir, "blobs", fmt.Sprintf("%06d.blob", num))
}

// specOf is the model spec of fp, or why it could not be read.
func specOf(db *store.DB, fp format.Fingerprint) (*specOutput, string) {
	m, err := db.Model(fp)
	if err != nil {
		return nil, err.Error()
	}
	return &specOutput{Architecture: m.Architecture, Layers: m.Layers, KVHeads: m.KVHeads, HeadDim: m.HeadDim,
		DType: m.DType.String(), WeightsID: m.WeightsID, RoPE: m.RoPE}, ""
}

func inspectOf(h *format.PacketHeader) *inspectOutput {
	out := &inspectOutput{Kind: "packet", ID: h.ID.String(), Namespace: h.Namespace, Model: h.Model.String(), AdapterID: h.AdapterID,
		Version: h.Version, Tokens: h.Tokens, KeptTokens: h.KeptTokens, HeaderTokens: h.HeaderTokens, TrailerTokens: h.TrailerTokens,
		TokenIDs: h.TokenIDs, BasePosition: h.BasePosition, Layers: h.Layers, KVHeads: h.KVHeads, HeadDim: h.HeadDim,
		DType: h.DType.String(), ExtentOffset: h.ExtentOffset, ExtentLength: h.ExtentLength,
		Created: time.Unix(0, h.CreatedUnixNs).UTC()}
	if out.TokenIDs == nil {
		out.TokenIDs = []uint32{}
	}
	for _, c := range h.Chunks {
		out.Chunks = append(out.Chunks, inspectCh{Layer: c.Layer, Kind: c.Kind.String(), Shape: c.Shape,
			DType: c.DType.String(), Codec: c.Codec.String(), Offset: c.Offset, Length: c.Length,
			RawLength: c.RawLength, CRC32C: fmt.Sprintf("%08x", c.CRC32C)})
	}
	return out
}

func (o *inspectOutput) text(w io.Writer) error {
	fmt.Fprintf(w, "packet     %s\nnamespace  %q\nmodel      %s\nadapter    %q\n", o.ID, o.Namespace, o.Model, o.AdapterID)
	fmt.Fprintf(w, "tokens     %d (%d header + %d document + %d trailer), base position %d\n",
		o.Tokens, o.HeaderTokens, len(o.TokenIDs), o.TrailerTokens, o.BasePosition)
	rows := o.Tokens
	if o.KeptTokens > 0 {
		rows = o.KeptTokens
		fmt.Fprintf(w, "pruned     %d of %d tokens per (layer, head), kept positions in a %d-byte bitmap per (layer, head)\n",
			o.KeptTokens, o.Tokens, (uint64(o.Tokens)+7)/8)
	}
	fmt.Fprintf(w, "shape      %d layers x K,V x [%d kv heads][%d tokens][%d head dim] %s\n", o.Layers, o.KVHeads, rows, o.HeadDim, o.DType)
	fmt.Fprintf(w, "extent     %s offset %d length %d\n", o.File, o.ExtentOffset, o.ExtentLength)
	fmt.Fprintf(w, "created    %s\nformat     v%d\n\n", o.Created.Format(time.RFC3339), o.Version)
	t := newTable(w, "LAYER", "KIND", "SHAPE", "DTYPE", "CODEC", "OFFSET", "LENGTH", "RAW", "CRC32C")
	for _, c := range o.Chunks {
		t.row(c.Layer, c.Kind, fmt.Sprint(c.Shape), c.DType, c.Codec, c.Offset, c.Length, c.RawLength, c.CRC32C)
	}
	if err := t.flush(); err != nil {
		return err
	}
	return o.Spec.text(w, o.SpecError)
}

// text prints the spec, or why there is none.
func (s *specOutput) text(w io.Writer, specErr string) error {
	if s == nil {
		fmt.Fprintf(w, "\nmodel spec: %s\n", specErr)
		return nil
	}
	r := s.RoPE
	fmt.Fprintf(w, "\nmodel spec %s: %d layers, %d kv heads, head dim %d, %s, weights %q\n",
		s.Architecture, s.Layers, s.KVHeads, s.HeadDim, s.DType, s.WeightsID)
	fmt.Fprintf(w, "rope       %v, rotary dims %d, theta %g, scaling %v (factor %g, low %g, high %g, original max %d, beta fast %g, slow %g, attention %g)\n",
		r.Style, r.RotaryDims, r.Theta, r.Scaling, r.Factor, r.LowFreqFactor, r.HighFreqFactor, r.OriginalMaxPos,
		r.BetaFast, r.BetaSlow, r.AttentionFactor)
	return nil
}
