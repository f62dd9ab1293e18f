package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
	"github.com/kvstore/kvstore/store/admin"
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

// inspectOutput is inspect's output for a packet: the admin handler's
// /inspect/{id}.
type inspectOutput admin.Packet

// specOutput is a model spec in JSON and text.
type specOutput = admin.Spec

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
	if r, err := remote(e); err != nil {
		return err
	} else if r {
		out := new(inspectOutput)
		if err := fetch(ctx, e, "/inspect/"+url.PathEscape(args[0]), url.Values{"ns": {ns}}, out); err != nil {
			return err
		}
		return output(e, out, out.text)
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
	out := (*inspectOutput)(admin.PacketOf(db, e.dir, h))
	return output(e, out, out.text)
}

// blobPath is the path of blob file num.
func blobPath(e *env, db *store.DB, num uint32) string { return admin.BlobPath(db, e.dir, num) }

// specOf is the model spec of fp, or why it could not be read.
func specOf(db *store.DB, fp format.Fingerprint) (*specOutput, string) { return admin.SpecOf(db, fp) }

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
	return specText(w, o.Spec, o.SpecError)
}

// specText prints the spec s, or why there is none.
func specText(w io.Writer, s *specOutput, specErr string) error {
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
