package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store"
)

// spanSpec is the span memory fixture's model: 2 layers, 2 KV heads, head
// dim 16, f32.
func spanSpec() *format.ModelSpec {
	return &format.ModelSpec{Architecture: "llama", Layers: 2, KVHeads: 2, HeadDim: 16, DType: format.DTypeF32,
		WeightsID: "span-cli", RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}}
}

// spanMemory builds, through the public store API, a memory of 96 tokens
// of deterministic pseudo-random keys and values whose surprisal peaks cut
// spans of 10 to 16 tokens, those under 12 left unfactored.
func spanMemory(t *testing.T, db *store.DB) *store.SpanMemory {
	t.Helper()
	const tokens = 96
	spec := spanSpec()
	in := &store.SpanInput{Model: spec, Surprisal: make([]float32, tokens)}
	state := uint64(0x9e3779b97f4a7c15)
	next := func() float32 { // xorshift64, uniform in [-1, 1)
		state ^= state << 13
		state ^= state >> 7
		state ^= state << 17
		return float32(state>>40)/(1<<23) - 1
	}
	for range spec.Layers {
		k, v := make([]float32, spec.KVHeads*tokens*spec.HeadDim), make([]float32, spec.KVHeads*tokens*spec.HeadDim)
		for i := range k {
			k[i], v[i] = next(), next()
		}
		in.K, in.V = append(in.K, k), append(in.V, v)
	}
	in.Surprisal[0] = float32(math.NaN())
	for i := 1; i < tokens; i++ {
		in.Surprisal[i] = 1 + next()/4
		if i%12 == 10 {
			in.Surprisal[i] = 8
		}
	}
	m, err := db.BuildSpanMemory(in, &store.SpanOptions{
		Segment: segment.Options{MinSpan: 8, MaxSpan: 16, MinFactored: 12}, ProjectionDim: 8,
		FactorAll: true, FactorDType: format.DTypeF32}) // random rows do not compress; the listing needs factored spans
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// spanTestStore is testStore's three packets plus two span memories:
// "ctx-1" in namespace "a" and, in namespace "b", a context whose id shares
// its first 4 hex digits with the first packet's (for ambiguity). It
// returns the directory, the packet ids and the context ids.
func spanTestStore(t *testing.T) (string, []format.PacketID, []store.ContextID) {
	t.Helper()
	dir, ids := testStore(t)
	db, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := spanMemory(t, db)
	fp := m.Model.Fingerprint()
	twin := ""
	for i := 0; twin == ""; i++ {
		name := fmt.Sprintf("twin-%d", i)
		if c := store.ComputeContextID("b", fp, name); c.String()[:4] == ids[0].String()[:4] {
			twin = name
		}
	}
	var ctxs []store.ContextID
	for _, c := range []struct{ ns, name string }{{"a", "ctx-1"}, {"b", twin}} {
		id, err := db.PutSpanMemory(context.Background(), c.ns, c.name, m)
		if err != nil {
			t.Fatal(err)
		}
		ctxs = append(ctxs, id)
	}
	return dir, ids, ctxs
}

func TestInspectContext(t *testing.T) {
	dir, _, ctxs := spanTestStore(t)
	var out contextOutput
	r := kv(t, "--dir", dir, "--json", "inspect", ctxs[0].String()[:12]).want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(dir, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	sr, err := db.OpenSpanMemory(context.Background(), "a", spanSpec().Fingerprint(), "ctx-1")
	if err != nil {
		t.Fatal(err)
	}
	m := sr.Meta()
	factored := 0
	for _, s := range m.Spans {
		if s.Factored {
			factored++
		}
	}
	switch {
	case out.Kind != "context" || out.ID != ctxs[0].String() || out.Namespace != "a" || out.Name != "ctx-1" ||
		out.Model != spanSpec().Fingerprint().String():
		t.Fatalf("identity: %+v", out)
	case out.Tokens != 96 || out.Spans != len(m.Spans) || out.Factored != factored || factored == 0 || factored == len(m.Spans) ||
		out.Anchors != len(m.Anchors) || out.Resident != len(m.Resident) || out.FactorDType != "f32" || out.ProjDim != 8:
		t.Fatalf("segmentation: %+v, root record has %d spans (%d factored), %d anchors", out, len(m.Spans), factored, len(m.Anchors))
	case out.BlobFile != m.BlobFile || out.ExtentOffset != m.ExtentOffset || out.ExtentLength != m.ExtentLength ||
		!strings.HasSuffix(out.File, fmt.Sprintf("%06d.blob", m.BlobFile)):
		t.Fatalf("extent: %+v", out)
	case len(out.Heads) != 4 || out.Spec == nil || out.Spec.HeadDim != 16:
		t.Fatalf("heads or spec: %+v", out)
	}
	var total uint64
	for _, h := range out.Heads {
		hm, err := sr.Head(h.Layer, h.Head)
		if err != nil {
			t.Fatal(err)
		}
		want := rankSummary{Min: math.MaxInt}
		var k int
		var bytes uint64
		for s, sp := range m.Spans {
			if sp.Factored {
				want.Min, want.Max = min(want.Min, hm.K[s].Rank), max(want.Max, hm.K[s].Rank)
				k += hm.K[s].Rank
				bytes += uint64(hm.K[s].Length + hm.V[s].Length)
			}
		}
		want.Mean = float64(k) / float64(factored)
		if h.KRank != want || h.FactorBytes != bytes || h.VRank.Min < 1 || h.VRank.Max > 16 {
			t.Fatalf("layer %d head %d: %+v, want K ranks %+v and %d factor bytes", h.Layer, h.Head, h, want, bytes)
		}
		total += bytes
	}
	if out.FactorBytes != total || out.ResidentBytes != 2*2*uint64(m.Blocks[0].Length) {
		t.Fatalf("bytes: factors %d (want %d), resident %d", out.FactorBytes, total, out.ResidentBytes)
	}
	sr.Release()
	if err := db.Close(); err != nil { // the binary needs the store's lock
		t.Fatal(err)
	}
	text := kv(t, "--dir", dir, "inspect", ctxs[0].String()).want(t, exitOK).stdout
	for _, want := range []string{ctxs[0].String(), `"ctx-1"`, "K RANK", fmt.Sprintf("%d spans (%d factored", len(m.Spans), factored),
		fmt.Sprintf("length %d", m.ExtentLength), "rotate-half"} {
		if !strings.Contains(text, want) {
			t.Fatalf("inspect text lacks %q:\n%s", want, text)
		}
	}
	kv(t, "--dir", dir, "inspect", "--ns", "b", ctxs[0].String()[:12]).want(t, exitFail) // not in b
}

// A prefix that matches a packet and a context is ambiguous (usage error)
// unless --ns tells them apart; the packet's inspect JSON says its kind.
func TestInspectAmbiguousAcrossKinds(t *testing.T) {
	dir, ids, ctxs := spanTestStore(t)
	prefix := ids[0].String()[:4]
	r := kv(t, "--dir", dir, "inspect", prefix).want(t, exitUsage)
	if !strings.Contains(r.stderr, "ambiguous") || !strings.Contains(r.stderr, "1 contexts") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	for _, c := range []struct{ ns, kind, id string }{{"a", "packet", ids[0].String()}, {"b", "context", ctxs[1].String()}} {
		t.Run(c.ns, func(t *testing.T) {
			var out struct{ Kind, ID string }
			r := kv(t, "--dir", dir, "--json", "inspect", "--ns", c.ns, prefix).want(t, exitOK)
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
				t.Fatal(err)
			}
			if out.Kind != c.kind || out.ID != c.id {
				t.Errorf("--ns %s: %s %s, want %s %s", c.ns, out.Kind, out.ID, c.kind, c.id)
			}
		})
	}
}

func TestLsContexts(t *testing.T) {
	dir, _, ctxs := spanTestStore(t)
	r := kv(t, "--dir", dir, "ls", "--contexts").want(t, exitOK)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(r.stdout, "ctx-1") {
		t.Fatalf("want a header and 2 rows:\n%s", r.stdout)
	}
	for _, c := range ctxs {
		if !strings.Contains(r.stdout, c.String()[:16]) {
			t.Fatalf("ls --contexts lacks %s:\n%s", c.Short(), r.stdout)
		}
	}
	for _, c := range []struct {
		args []string
		n    int
		more bool
	}{
		{nil, 2, false},
		{[]string{"--ns", "a"}, 1, false},
		{[]string{"--ns", "c"}, 0, false},
		{[]string{"--limit", "1"}, 1, true},
		{[]string{"--model", spanSpec().Fingerprint().String()[:6]}, 2, false},
		{[]string{"--model", tinySpec().Fingerprint().String()[:6]}, 0, false},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out lsContextsOutput
			r := kv(t, append([]string{"ls", "--contexts", "--dir", dir, "--json"}, c.args...)...).want(t, exitOK)
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Contexts) != c.n || out.More != c.more {
				t.Errorf("ls --contexts %v: %d contexts (more %v), want %d (%v)", c.args, len(out.Contexts), out.More, c.n, c.more)
			}
			for _, x := range out.Contexts {
				if x.Tokens != 96 || x.Spans < 2 || x.Factored < 1 || x.Factored >= x.Spans || x.Bytes == 0 || x.Created.IsZero() {
					t.Errorf("ls --contexts row %+v", x)
				}
			}
		})
	}
	// --limit 1 gives a cursor; --after it lists the other context.
	var p1, p2 lsContextsOutput
	if err := json.Unmarshal([]byte(kv(t, "ls", "--contexts", "--dir", dir, "--json", "--limit", "1").want(t, exitOK).stdout), &p1); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(kv(t, "ls", "--contexts", "--dir", dir, "--json", "--after", p1.Next).want(t, exitOK).stdout), &p2); err != nil {
		t.Fatal(err)
	}
	if len(p1.Contexts) != 1 || len(p2.Contexts) != 1 || p2.More || p1.Contexts[0].ID == p2.Contexts[0].ID {
		t.Fatalf("pages %+v then (after %q) %+v", p1, p1.Next, p2)
	}
	// Plain ls still lists the packets only; stat counts both kinds apart.
	var pk lsOutput
	if err := json.Unmarshal([]byte(kv(t, "ls", "--dir", dir, "--json").want(t, exitOK).stdout), &pk); err != nil || len(pk.Packets) != 3 {
		t.Fatalf("ls: %d packets (%v)", len(pk.Packets), err)
	}
	var st statOutput
	if err := json.Unmarshal([]byte(kv(t, "stat", "--dir", dir, "--json").want(t, exitOK).stdout), &st); err != nil ||
		st.Packets != 3 || st.SpanMemories != 2 {
		t.Fatalf("stat: %d packets, %d span memories (%v)", st.Packets, st.SpanMemories, err)
	}
}
