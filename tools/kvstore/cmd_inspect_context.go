package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// contextOutput is inspect's JSON for a span memory context.
type contextOutput struct {
	Kind          string `json:"kind"` // "context"
	ID            string `json:"id"`
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	Model         string `json:"model"`
	Tokens        int    `json:"tokens"`
	BasePosition  int64  `json:"base_position"`
	Layers        int    `json:"layers"`
	KVHeads       int    `json:"kv_heads"`
	HeadDim       int    `json:"head_dim"`
	ResidentDType string `json:"resident_dtype"`
	FactorDType   string `json:"factor_dtype"`
	Projection    string `json:"projection"` // routing artifact; "" for none
	ProjDim       int    `json:"projection_dim"`
	Spans         int    `json:"spans"`
	Factored      int    `json:"factored_spans"`
	Anchors       int    `json:"anchors"`
	Resident      int    `json:"resident_rows"`
	// Surprisal statistics of the segmentation; absent when not finite.
	SurprisalMean   *float64      `json:"surprisal_mean,omitempty"`
	SurprisalStd    *float64      `json:"surprisal_std,omitempty"`
	Threshold       *float64      `json:"threshold,omitempty"`
	AnchorThreshold *float64      `json:"anchor_threshold,omitempty"`
	File            string        `json:"file"`
	BlobFile        uint32        `json:"blob_file"`
	ExtentOffset    uint64        `json:"extent_offset"`
	ExtentLength    uint64        `json:"extent_length"`
	ResidentBytes   uint64        `json:"resident_bytes"` // K and V, every layer
	FactorBytes     uint64        `json:"factor_bytes"`   // K and V factors, every head
	Created         time.Time     `json:"created"`
	Heads           []contextHead `json:"heads"`
	Spec            *specOutput   `json:"model_spec"`
	SpecError       string        `json:"model_spec_error,omitempty"`
}

// contextHead summarises one (layer, KV head): the SVD ranks of its
// factored spans' K and V factors and their stored bytes.
type contextHead struct {
	Layer       int         `json:"layer"`
	Head        int         `json:"head"`
	KRank       rankSummary `json:"k_rank"`
	VRank       rankSummary `json:"v_rank"`
	FactorBytes uint64      `json:"factor_bytes"`
}

// rankSummary is min, mean and max of the ranks of a head's factored
// spans (all zero when none is factored).
type rankSummary struct {
	Min  int     `json:"min"`
	Mean float64 `json:"mean"`
	Max  int     `json:"max"`
}

// findTarget resolves the hex prefix arg (passed checkIDs) among packet
// ids and span memory context ids together, in namespace ns when not
// empty: exactly one of the two results is set. No match is ErrNotFound;
// several, of either kind or both, a usage error.
func findTarget(db *store.DB, arg, ns string) (*format.PacketHeader, *store.SpanMemoryInfo, error) {
	packets, err := matchPackets(db, arg, ns)
	if err != nil {
		return nil, nil, err
	}
	prefix := strings.ToLower(arg)
	var contexts []store.SpanMemoryInfo
	err = db.SpanMemories(func(i store.SpanMemoryInfo) error {
		if (ns == "" || i.Namespace == ns) && strings.HasPrefix(i.Context.String(), prefix) {
			contexts = append(contexts, i)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, nil, err
	case len(packets)+len(contexts) == 0:
		return nil, nil, notFound(db, "packet or context", arg, ns, true)
	case len(packets)+len(contexts) > 1:
		return nil, nil, fmt.Errorf("%w: id %s is ambiguous: %d packets and %d contexts match (give more digits or --ns)",
			errUsage, arg, len(packets), len(contexts))
	case len(contexts) == 1:
		return nil, &contexts[0], nil
	}
	return packets[0], nil, nil
}

// inspectContext prints span memory c: its root record, the rank summary
// of every head record, and the model spec.
func inspectContext(e *env, db *store.DB, c *store.SpanMemoryInfo) error {
	r, err := db.OpenSpanMemory(context.Background(), c.Namespace, c.Model, c.Name)
	if err != nil {
		return err
	}
	defer r.Release()
	m := r.Meta()
	out := &contextOutput{Kind: "context", ID: m.Context.String(), Namespace: c.Namespace, Name: c.Name,
		Model: m.Model.String(), Tokens: m.Tokens, BasePosition: m.BasePosition,
		Layers: m.Layers, KVHeads: m.KVHeads, HeadDim: m.HeadDim,
		ResidentDType: m.ResidentDType.String(), FactorDType: m.FactorDType.String(),
		Projection: m.Projection, ProjDim: m.ProjDim, Spans: c.Spans, Factored: c.Factored,
		Anchors: len(m.Anchors), Resident: len(m.Resident),
		SurprisalMean: finite(m.Mean), SurprisalStd: finite(m.Std), Threshold: finite(m.Threshold),
		AnchorThreshold: finite(m.AnchorThreshold),
		File:            blobPath(e, db, m.BlobFile), BlobFile: m.BlobFile, ExtentOffset: m.ExtentOffset, ExtentLength: m.ExtentLength,
		Created: time.Unix(0, m.CreatedUnixNs).UTC(), Heads: []contextHead{}}
	for _, b := range m.Blocks {
		out.ResidentBytes += 2 * b.Length
	}
	for l := range m.Layers {
		for h := range m.KVHeads {
			hm, err := r.Head(l, h)
			if err != nil {
				return err
			}
			ch := headSummary(hm, m)
			out.FactorBytes += ch.FactorBytes
			out.Heads = append(out.Heads, ch)
		}
	}
	out.Spec, out.SpecError = specOf(db, m.Model)
	return output(e, out, out.text)
}

// headSummary summarises the factor blocks of head record h of memory m.
func headSummary(h *store.HeadMeta, m *store.SpanMeta) contextHead {
	out := contextHead{Layer: h.Layer, Head: h.Head}
	var k, v []int
	for s, sp := range m.Spans {
		if !sp.Factored {
			continue
		}
		k, v = append(k, h.K[s].Rank), append(v, h.V[s].Rank)
		out.FactorBytes += uint64(h.K[s].Length) + uint64(h.V[s].Length)
	}
	out.KRank, out.VRank = summarise(k), summarise(v)
	return out
}

func summarise(ranks []int) rankSummary {
	if len(ranks) == 0 {
		return rankSummary{}
	}
	s := rankSummary{Min: ranks[0], Max: ranks[0]}
	sum := 0
	for _, r := range ranks {
		s.Min, s.Max = min(s.Min, r), max(s.Max, r)
		sum += r
	}
	s.Mean = float64(sum) / float64(len(ranks))
	return s
}

// finite is &f, or nil for NaN and infinities (which JSON cannot hold).
func finite(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

func (o *contextOutput) text(w io.Writer) error {
	fmt.Fprintf(w, "context    %s\nnamespace  %q\nname       %q\nmodel      %s\n", o.ID, o.Namespace, o.Name, o.Model)
	fmt.Fprintf(w, "tokens     %d, base position %d\n", o.Tokens, o.BasePosition)
	fmt.Fprintf(w, "shape      %d layers x %d kv heads x head dim %d; resident rows %s, factors %s\n",
		o.Layers, o.KVHeads, o.HeadDim, o.ResidentDType, o.FactorDType)
	fmt.Fprintf(w, "segments   %d spans (%d factored, %d resident), %d anchors, %d resident rows; surprisal %s\n",
		o.Spans, o.Factored, o.Spans-o.Factored, o.Anchors, o.Resident, o.surprisal())
	proj := "none"
	if o.Projection != "" {
		proj = fmt.Sprintf("%q, d' %d", o.Projection, o.ProjDim)
	}
	fmt.Fprintf(w, "routing    projection %s\n", proj)
	fmt.Fprintf(w, "extent     %s offset %d length %d (%s)\n", o.File, o.ExtentOffset, o.ExtentLength, humanBytes(o.ExtentLength))
	fmt.Fprintf(w, "bytes      resident %d (%s), factors %d (%s)\n",
		o.ResidentBytes, humanBytes(o.ResidentBytes), o.FactorBytes, humanBytes(o.FactorBytes))
	fmt.Fprintf(w, "created    %s\n\n", o.Created.Format(time.RFC3339))
	t := newTable(w, "LAYER", "HEAD", "K RANK MIN/MEAN/MAX", "V RANK MIN/MEAN/MAX", "FACTOR BYTES")
	for _, h := range o.Heads {
		t.row(h.Layer, h.Head, h.KRank, h.VRank, h.FactorBytes)
	}
	if err := t.flush(); err != nil {
		return err
	}
	return specText(w, o.Spec, o.SpecError)
}

func (r rankSummary) String() string { return fmt.Sprintf("%d/%.1f/%d", r.Min, r.Mean, r.Max) }

// surprisal formats the segmentation's statistics, "-" for each missing.
func (o *contextOutput) surprisal() string {
	f := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.3g", *p)
	}
	return fmt.Sprintf("mean %s, std %s, threshold %s, anchor threshold %s",
		f(o.SurprisalMean), f(o.SurprisalStd), f(o.Threshold), f(o.AnchorThreshold))
}
