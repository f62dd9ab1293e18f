package spanmem

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/zeebo/blake3"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/segment"
)

// testModel is a small random Llama (head dim 16, GQA) whose prefill gives
// real RoPE'd keys and surprisals.
var testModel = llama.Config{Dim: 64, Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 64, SeqLen: 4096,
	NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}}

// testOptions make several spans of 8 to 16 tokens, those under 12 left
// unfactored, so that both kinds are exercised, and factor every span the
// segmentation factors (FactorAll): the random model's rows of a few dozen
// tokens do not compress enough to pay for a memory's records and padding
// (Build refuses them by default, ErrNotSmaller; size_test.go tests that
// rule).
var testOptions = Options{Segment: segment.Options{MinSpan: 8, MaxSpan: 16, MinFactored: 12}, ProjectionDim: 4, FactorAll: true}

func testInput(t *testing.T, tokens int, base int64) *Input {
	t.Helper()
	m, err := llama.Random(testModel, 11)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int, tokens)
	for i := range ids {
		ids[i] = (i*i*7 + i*3 + 1) % m.Vocab
	}
	res, err := m.Forward(ids, base, nil, llama.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := &Input{Model: m.Spec(format.DTypeBF16, "spanmem-test"), BasePosition: base, Surprisal: make([]float32, tokens)}
	in.Surprisal[0] = float32(math.NaN())
	for i := 1; i < tokens; i++ {
		in.Surprisal[i] = float32(res.Surprisal[i-1])
	}
	for _, kv := range res.Cache.Layers {
		in.K, in.V = append(in.K, kv.K), append(in.V, kv.V)
	}
	return in
}

// artifacts is an in-memory Artifacts.
type artifacts struct {
	byName map[string]Artifact
	ranks  []float32
	err    error
	asked  []string
}

func (a *artifacts) Artifact(name string) (Artifact, bool, error) {
	a.asked = append(a.asked, name)
	x, ok := a.byName[name]
	return x, ok, a.err
}

func (a *artifacts) HeadValues(name string) ([]float32, error) {
	a.asked = append(a.asked, name)
	return a.ranks, nil
}

func TestBuildFitsW(t *testing.T) {
	in := testInput(t, 64, 3)
	art := &artifacts{}
	m, err := Build(in, &testOptions, art)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); err != nil {
		t.Fatalf("built memory does not check: %v", err)
	}
	if want := []string{ArtifactRouterW, ArtifactRouterWPCA, ArtifactRank, ArtifactRankGate}; !slices.Equal(art.asked, want) {
		t.Fatalf("asked for %v, want %v", art.asked, want)
	}
	p := m.Projection
	if p.Name != ArtifactRouterWPCA || p.Fitted == nil || p.Dim != 4 || p.Hash != blake3.Sum256(p.Fitted) {
		t.Fatalf("projection %q dim %d fitted %v", p.Name, p.Dim, p.Fitted != nil)
	}
	again, err := Build(in, &testOptions, &artifacts{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Projection.Fitted, p.Fitted) || !bytes.Equal(again.ResidentK[1], m.ResidentK[1]) {
		t.Fatal("Build is not deterministic")
	}

	// A stored W is used as is, and not carried for storing again.
	stored := &artifacts{byName: map[string]Artifact{ArtifactRouterW: {Data: p.Fitted, Meta: p.FittedMeta, Hash: p.Hash}}}
	w, err := Build(in, &testOptions, stored)
	if err != nil {
		t.Fatal(err)
	}
	if w.Projection.Name != ArtifactRouterW || w.Projection.Fitted != nil || w.Projection.Hash != p.Hash || len(stored.asked) != 3 {
		t.Fatalf("with a stored W: projection %q, fitted %v, asked %v", w.Projection.Name, w.Projection.Fitted != nil, stored.asked)
	}
	if got, want := w.Heads[3].Summaries[0].Proj, m.Heads[3].Summaries[0].Proj; len(got) != 4 || got[0] != want[0] {
		t.Fatalf("summaries projected with the stored W differ from the fitted one's: %v vs %v", got, want)
	}
}

func TestBuildRankGate(t *testing.T) {
	in := testInput(t, 64, 0)
	m, err := Build(in, &testOptions, &artifacts{ranks: []float32{1, 2, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	factored := 0
	for g, h := range m.Heads {
		for s, f := range h.K {
			if f == nil {
				continue
			}
			factored++
			if want := 1 + g%2; f.Rank != want || h.V[s].Rank != want {
				t.Fatalf("group %d span %d: ranks %d and %d, gate %d", g, s, f.Rank, h.V[s].Rank, want)
			}
		}
	}
	if factored == 0 {
		t.Fatal("the fixture factored no span")
	}
}

func TestBuildRefusals(t *testing.T) {
	in := testInput(t, 32, 0)
	bad := *in
	bad.K = bad.K[:1]
	if _, err := Build(&bad, &testOptions, &artifacts{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("one K layer of two: %v", err)
	}
	o := testOptions
	o.FactorDType = format.DTypeU8
	if _, err := Build(in, &o, &artifacts{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("integer factor dtype: %v", err)
	}
	o = testOptions
	o.ResidentTail = -1
	if _, err := Build(in, &o, &artifacts{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative resident tail: %v", err)
	}
	boom := errors.New("catalog down")
	if _, err := Build(in, &testOptions, &artifacts{err: boom}); !errors.Is(err, boom) {
		t.Errorf("artifact read failure: %v", err)
	}
	m, err := Build(in, &testOptions, &artifacts{})
	if err != nil {
		t.Fatal(err)
	}
	m.Heads = m.Heads[:3]
	if err := m.Check(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a memory missing a head: %v", err)
	}
}

// TestBuildResidentTail: with ResidentTail every span holding one of the
// context's last tokens keeps its rows (no factors, its tokens resident),
// the spans before the tail are as without it, and the memory checks.
func TestBuildResidentTail(t *testing.T) {
	in := testInput(t, 64, 0)
	all, err := Build(in, &testOptions, &artifacts{})
	if err != nil {
		t.Fatal(err)
	}
	n, tail := len(in.Surprisal), 20
	o := testOptions
	o.ResidentTail = tail
	m, err := Build(in, &o, &artifacts{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	if len(m.Segmentation.Spans) != len(all.Segmentation.Spans) {
		t.Fatalf("%d spans with a tail, %d without", len(m.Segmentation.Spans), len(all.Segmentation.Spans))
	}
	resident := make(map[int]bool, len(m.Resident))
	for _, r := range m.Resident {
		resident[r] = true
	}
	inTail, before := 0, 0
	for s, sp := range m.Segmentation.Spans {
		was := all.Segmentation.Spans[s].Factored
		if sp.End <= n-tail {
			if sp.Factored != was {
				t.Errorf("span %d [%d, %d) before the tail: factored %v, %v without a tail", s, sp.Start, sp.End, sp.Factored, was)
			}
			before++
			continue
		}
		if was {
			inTail++
		}
		if sp.Factored || m.Heads[0].K[s] != nil || m.Heads[0].V[s] != nil {
			t.Errorf("span %d [%d, %d) in the last %d tokens is factored", s, sp.Start, sp.End, tail)
		}
		for tok := sp.Start; tok < sp.End; tok++ {
			if !resident[tok] {
				t.Fatalf("token %d of tail span %d is not resident", tok, s)
			}
		}
	}
	if inTail == 0 || before == 0 {
		t.Fatalf("%d spans in the tail factored without it, %d before it: the test needs both", inTail, before)
	}
}

// TestLayoutExtent: the extent written holds every block where its records
// say, each block matches its CRC32C, factors decode to what was built,
// the trailer names the context, and the records round-trip through
// format's codecs.
func TestLayoutExtent(t *testing.T) {
	in := testInput(t, 64, 5)
	m, err := Build(in, &testOptions, &artifacts{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := LayoutExtent(m)
	if err != nil {
		t.Fatal(err)
	}
	fs := vfs.NewMem()
	f, err := fs.Create("/x.blob", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	const off = format.BlobHeaderSize
	id := format.ContextID{9}
	if err := e.Write(f, "/x.blob", off, id); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, e.Length)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	tr, err := format.DecodeTrailer(buf[len(buf)-format.TrailerSize:])
	if err != nil || tr.Packet != format.PacketID(id) || tr.Offset != off {
		t.Fatalf("trailer %+v, %v", tr, err)
	}
	meta := e.Meta(m, id, 1, off)
	v, err := meta.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if meta, err = format.DecodeSpanMeta(v); err != nil {
		t.Fatal(err)
	}
	for l, b := range meta.Blocks {
		if format.CRC(buf[b.KOffset:b.KOffset+b.Length]) != b.KCRC || !bytes.Equal(buf[b.VOffset:b.VOffset+b.Length], m.ResidentV[l]) {
			t.Fatalf("layer %d resident blocks", l)
		}
	}
	for g := range m.Heads {
		hv, err := e.Head(m, g).Encode(meta)
		if err != nil {
			t.Fatal(err)
		}
		h, err := format.DecodeHeadMeta(hv, meta)
		if err != nil {
			t.Fatal(err)
		}
		for s, k := range h.K {
			if m.Heads[g].K[s] == nil {
				continue
			}
			blk := buf[k.Offset : k.Offset+uint64(k.Length)]
			fk, dt, err := format.DecodeFactors(blk)
			if err != nil || format.CRC(blk) != k.CRC || dt != m.FactorDType || fk.Rank != m.Heads[g].K[s].Rank || fk.Rows != m.Heads[g].K[s].Rows {
				t.Fatalf("group %d span %d K factors: %v", g, s, err)
			}
		}
	}
}
