package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// spanModelCfg is a small random Llama (head dim 16, GQA) whose prefill
// gives real RoPE'd keys and surprisals for span memory tests.
var spanModelCfg = llama.Config{Dim: 64, Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 64, SeqLen: 4096,
	NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}}

// spanSegment makes several spans of 8 to 16 tokens, those under 12 left
// unfactored, so that both kinds are exercised.
var spanSegment = segment.Options{MinSpan: 8, MaxSpan: 16, MinFactored: 12}

// spanFixture prefills tokens of a random model at base and returns the
// model and the cache as a SpanInput stored in dtype dt. The text is two
// tokens in an irregular order: every hidden state lies in the span of
// their embeddings and values, so that each span's pre-RoPE keys and
// values have rank at most 4 and its factors take less room than its
// rows (BuildSpanMemory keeps rows resident otherwise); over a few
// hundred tokens its memory is smaller than its rows (TestSpanMemorySize).
func spanFixture(t testing.TB, tokens int, base int64, dt format.DType) (*llama.Model, *SpanInput) {
	return spanFixtureText(t, tokens, base, dt, func(i int) int { return (i*i*7 + i*3 + 1) % 13 / 7 })
}

// spanFixtureText is spanFixture with token i of the text id(i) mod the
// vocabulary.
func spanFixtureText(t testing.TB, tokens int, base int64, dt format.DType, id func(int) int) (*llama.Model, *SpanInput) {
	t.Helper()
	m, err := llama.Random(spanModelCfg, 11)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int, tokens)
	for i := range ids {
		ids[i] = id(i) % m.Vocab
	}
	res, err := m.Forward(ids, base, nil, llama.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := &SpanInput{Model: m.Spec(dt, "span-test"), BasePosition: base, Surprisal: make([]float32, tokens)}
	in.Surprisal[0] = float32(math.NaN())
	for i := 1; i < tokens; i++ {
		in.Surprisal[i] = float32(res.Surprisal[i-1])
	}
	for _, kv := range res.Cache.Layers {
		in.K, in.V = append(in.K, kv.K), append(in.V, kv.V)
	}
	return m, in
}

func openSpanDB(t testing.TB, disk bool) (*DB, vfs.FS, string) {
	t.Helper()
	fs, dir := vfs.FS(vfs.NewMem()), "/db"
	if disk {
		fs, dir = vfs.Default, t.TempDir()
	}
	db, err := Open(dir, &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	return db, fs, dir
}

// putOpenSpan puts m as context name of namespace "ns" and opens it for
// reading; the caller releases the reader.
func putOpenSpan(t testing.TB, db *DB, m *SpanMemory, name string) *SpanReader {
	t.Helper()
	if _, err := db.PutSpanMemory(context.Background(), "ns", name, m); err != nil {
		t.Fatal(err)
	}
	r, err := db.OpenSpanMemory(context.Background(), "ns", m.Model.Fingerprint(), name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// buildSpans builds in's memory with o, spanSegment where o leaves the
// segmentation zero, and FactorAll: the fixtures' contexts of a few dozen
// tokens of 16-dim heads cannot pay for a memory's records and padding,
// and BuildSpanMemory refuses them by default (ErrSpanNotSmaller;
// TestSpanMemorySize tests that rule).
func buildSpans(t testing.TB, db *DB, in *SpanInput, o SpanOptions) *SpanMemory {
	t.Helper()
	if o.Segment == (segment.Options{}) {
		o.Segment = spanSegment
	}
	o.FactorAll = true
	m, err := db.BuildSpanMemory(in, &o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// spanMeta reads the root record of (ns, name) as the store does.
func (db *DB) spanMeta(ns, name string) (*SpanMeta, error) { return db.spans().Meta(ns, name) }

func TestSpanMemoryRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		dt, factors format.DType
		disk        bool
	}{
		{format.DTypeF32, format.DTypeF32, false},
		{format.DTypeBF16, format.DTypeBF16, true},
		{format.DTypeF16, format.DTypeF32, false},
	} {
		t.Run(fmt.Sprintf("%v-%v-disk=%v", tc.dt, tc.factors, tc.disk), func(t *testing.T) {
			db, fs, dir := openSpanDB(t, tc.disk)
			_, in := spanFixture(t, 100, 7, tc.dt)
			m := buildSpans(t, db, in, SpanOptions{FactorDType: tc.factors})
			checkSpanShape(t, m)
			id, err := db.PutSpanMemory(context.Background(), "ns", "ctx-1", m)
			if err != nil {
				t.Fatal(err)
			}
			if want := ComputeContextID("ns", m.Model.Fingerprint(), "ctx-1"); id != want {
				t.Fatalf("id %s, want %s", id.Short(), want.Short())
			}
			checkSpanReader(t, db, m, in)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = Open(dir, &Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			checkSpanReader(t, db, m, in)
		})
	}
}

// checkSpanShape checks the memory BuildSpanMemory made.
func checkSpanShape(t *testing.T, m *SpanMemory) {
	t.Helper()
	seg := m.Segmentation
	var factored, plain int
	for _, s := range seg.Spans {
		if s.Factored {
			factored++
		} else {
			plain++
		}
	}
	if factored == 0 || plain == 0 {
		t.Fatalf("fixture should give factored and unfactored spans: %d and %d", factored, plain)
	}
	if len(m.Resident) < len(seg.Anchors) || !subset(seg.Anchors, m.Resident) {
		t.Fatalf("resident rows %v miss anchors %v", m.Resident, seg.Anchors)
	}
	if m.Projection.Name != ArtifactRouterWPCA || m.Projection.Fitted == nil || m.Projection.Dim != m.Model.HeadDim {
		t.Fatalf("projection %q dim %d fitted %v: want a fitted PCA W of dim %d (d' clipped to the head dim)",
			m.Projection.Name, m.Projection.Dim, m.Projection.Fitted != nil, m.Model.HeadDim)
	}
}

// checkSpanReader reads everything back and compares it with m and the
// cache it was built from.
func checkSpanReader(t *testing.T, db *DB, m *SpanMemory, in *SpanInput) {
	t.Helper()
	r, err := db.OpenSpanMemory(context.Background(), "ns", m.Model.Fingerprint(), "ctx-1")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	meta := r.Meta()
	if meta.Tokens != m.Tokens || len(meta.Spans) != len(m.Segmentation.Spans) || meta.BasePosition != m.BasePosition ||
		meta.Projection != m.Projection.Name || meta.ProjectionHash != m.Projection.Hash {
		t.Fatalf("meta %+v does not describe the memory", meta)
	}
	for l := range m.Model.Layers {
		k, v, err := r.Resident(l)
		if err != nil {
			t.Fatal(err)
		}
		if string(k) != string(m.ResidentK[l]) || string(v) != string(m.ResidentV[l]) {
			t.Fatalf("layer %d: resident rows differ", l)
		}
		for h := range m.Model.KVHeads {
			checkSpanHead(t, r, m, in, l, h)
		}
	}
}

func checkSpanHead(t *testing.T, r *SpanReader, m *SpanMemory, in *SpanInput, l, h int) {
	t.Helper()
	g := l*m.Model.KVHeads + h
	sums, err := r.Summaries(l, h)
	if err != nil {
		t.Fatal(err)
	}
	for s, sum := range sums {
		want := m.Heads[g].Summaries[s]
		if fmt.Sprint(sum.Key, sum.Value, sum.Proj) != fmt.Sprint(want.Key, want.Value, want.Proj) {
			t.Fatalf("layer %d head %d span %d: summary differs", l, h, s)
		}
	}
	hd, n := m.Model.HeadDim, m.Tokens
	for s, sp := range m.Segmentation.Spans {
		if !sp.Factored {
			if _, err := r.Factors(l, h, s, format.ChunkK); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("factors of unfactored span %d: %v", s, err)
			}
			continue
		}
		enc, err := reconstruct.AppendFactors(nil, m.Heads[g].K[s], m.FactorDType)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.FactorBytes(l, h, s, format.ChunkK)
		if err != nil || string(got) != string(enc) {
			t.Fatalf("layer %d head %d span %d: stored K factors differ (%v)", l, h, s, err)
		}
		k, v := make([]float32, sp.Len()*hd), make([]float32, sp.Len()*hd)
		if err := r.ReconstructSpan(l, h, s, r.Meta().BasePosition, k, v); err != nil {
			t.Fatal(err)
		}
		// At rank up to 32 of a 16-dim head every span is kept whole (up to
		// the energy threshold and the factor dtype's rounding).
		wantK := in.K[l][(h*n+sp.Start)*hd : (h*n+sp.End)*hd]
		wantV := in.V[l][(h*n+sp.Start)*hd : (h*n+sp.End)*hd]
		if e := relErr(k, wantK); e > 0.15 {
			t.Fatalf("layer %d head %d span %d: reconstructed keys off by %.3g", l, h, s, e)
		}
		if e := relErr(v, wantV); e > 0.15 {
			t.Fatalf("layer %d head %d span %d: reconstructed values off by %.3g", l, h, s, e)
		}
	}
}

func relErr(got, want []float32) float64 {
	var num, den float64
	for i := range got {
		d := float64(got[i] - want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

func TestSpanMemoryExactAtFullRank(t *testing.T) {
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	_, in := spanFixture(t, 64, 0, format.DTypeF32)
	// f32 factors: f16's would round U and Vt to 2^-11.
	m := buildSpans(t, db, in, SpanOptions{SVD: reconstruct.SVDOptions{Energy: 1}, FactorDType: format.DTypeF32})
	r := putOpenSpan(t, db, m, "ctx-1")
	defer r.Release()
	hd, n := m.Model.HeadDim, m.Tokens
	factored := 0
	for s, sp := range m.Segmentation.Spans {
		if !sp.Factored {
			continue
		}
		factored++
		k, v := make([]float32, sp.Len()*hd), make([]float32, sp.Len()*hd)
		if err := r.ReconstructSpan(1, 1, s, 0, k, v); err != nil {
			t.Fatal(err)
		}
		if e := relErr(k, in.K[1][(n+sp.Start)*hd:(n+sp.End)*hd]); e > 1e-5 {
			t.Fatalf("span %d: keys off by %.3g at full rank", s, e)
		}
		if e := relErr(v, in.V[1][(n+sp.Start)*hd:(n+sp.End)*hd]); e > 1e-5 {
			t.Fatalf("span %d: values off by %.3g at full rank", s, e)
		}
	}
	if factored == 0 {
		t.Fatal("the fixture factors no span")
	}
}

func TestSpanMemoryResidentRows(t *testing.T) {
	// Resident keys are stored at local positions, like packets: shifted by
	// the base they are the model's keys at base+t.
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	model, in := spanFixture(t, 48, 100, format.DTypeF32)
	m := buildSpans(t, db, in, SpanOptions{})
	r := putOpenSpan(t, db, m, "ctx-1")
	defer r.Release()
	kb, vb, err := r.Resident(1)
	if err != nil {
		t.Fatal(err)
	}
	hd, n, rows := m.Model.HeadDim, m.Tokens, m.Resident
	k, shifted := make([]float32, len(kb)/4), make([]byte, len(kb))
	if err := reconstruct.Shift(shifted, kb, format.DTypeF32, model.RoPE(), m.Model.KVHeads, len(rows), 100); err != nil {
		t.Fatal(err)
	}
	if err := format.ToF32(k, shifted, format.DTypeF32); err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(vb)/4)
	if err := format.ToF32(v, vb, format.DTypeF32); err != nil {
		t.Fatal(err)
	}
	for h := range m.Model.KVHeads {
		for i, tok := range rows {
			want := in.K[1][(h*n+tok)*hd : (h*n+tok+1)*hd]
			if e := relErr(k[(h*len(rows)+i)*hd:(h*len(rows)+i+1)*hd], want); e > 1e-5 {
				t.Fatalf("head %d row %d (token %d): key off by %.3g", h, i, tok, e)
			}
			if e := relErr(v[(h*len(rows)+i)*hd:(h*len(rows)+i+1)*hd], in.V[1][(h*n+tok)*hd:(h*n+tok+1)*hd]); e != 0 {
				t.Fatalf("head %d row %d: value differs", h, i)
			}
		}
	}
}

func TestSpanMemoryArtifacts(t *testing.T) {
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	// Varied text, so that the spans left to the energy rule need more
	// than rank 4.
	_, in := spanFixtureText(t, 64, 0, format.DTypeF32, func(i int) int { return i*i*7 + i*3 + 1 })
	fp := in.Model.Fingerprint()
	first := buildSpans(t, db, in, SpanOptions{ProjectionDim: 4})
	if _, err := db.PutSpanMemory(context.Background(), "ns", "a", first); err != nil {
		t.Fatal(err)
	}
	// The fitted W is stored in the same commit, and reused by the next build.
	data, err := db.GetArtifact(fp, ArtifactRouterWPCA)
	if err != nil {
		t.Fatal(err)
	}
	info, err := db.StatArtifact(fp, ArtifactRouterWPCA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spanmem.DecodeProjections(data, info.Meta, 2, 2, 16); err != nil {
		t.Fatal(err)
	}
	second := buildSpans(t, db, in, SpanOptions{ProjectionDim: 8})
	if second.Projection.Fitted != nil || second.Projection.Hash != first.Projection.Hash || second.Projection.Dim != 4 {
		t.Fatalf("second build did not reuse the stored W: %+v", second.Projection)
	}
	// A trained W wins; a rank gate fixes the ranks.
	ps := make([]*segment.Projection, 4)
	for g := range ps {
		ps[g] = &segment.Projection{Dim: 2, HeadDim: 16, W: make([]float32, 32)}
		ps[g].W[g] = 1
	}
	putArtifact := func(name string, data []byte, meta ArtifactMeta, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := db.PutArtifact(fp, name, data, meta); err != nil {
			t.Fatal(err)
		}
	}
	d, meta, err := spanmem.EncodeProjections(ps, 2, 2)
	putArtifact(ArtifactRouterW, d, meta, err)
	d, meta, err = EncodeHeadValues([]float32{1, 2, 3, 0}, 2, 2)
	putArtifact(ArtifactRank, d, meta, err)
	third := buildSpans(t, db, in, SpanOptions{})
	if third.Projection.Name != ArtifactRouterW || third.Projection.Dim != 2 || third.Projection.Fitted != nil {
		t.Fatalf("trained W not used: %+v", third.Projection)
	}
	for g, h := range third.Heads {
		for s, f := range h.K {
			if f == nil {
				continue
			}
			if want := []int{1, 2, 3}; g < 3 && (f.Rank != want[g] || h.V[s].Rank != want[g]) {
				t.Fatalf("group %d span %d: ranks %d, %d, rank gate says %d", g, s, f.Rank, h.V[s].Rank, want[g])
			}
			if g == 3 && f.Rank < 4 {
				t.Fatalf("group 3 (gate 0: energy) span %d: rank %d", s, f.Rank)
			}
		}
	}
}

func TestSpanMemoryFittedConflict(t *testing.T) {
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	_, in := spanFixture(t, 64, 0, format.DTypeF32)
	a := buildSpans(t, db, in, SpanOptions{ProjectionDim: 4})
	b := buildSpans(t, db, in, SpanOptions{ProjectionDim: 3})
	if _, err := db.PutSpanMemory(context.Background(), "ns", "a", a); err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutSpanMemory(context.Background(), "ns", "b", b); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a memory fitted with another W than the stored one: %v", err)
	}
	// The same W again is fine (and not stored twice).
	c := buildSpans(t, db, in, SpanOptions{ProjectionDim: 4})
	c.Projection = a.Projection
	if _, err := db.PutSpanMemory(context.Background(), "ns", "c", c); err != nil {
		t.Fatal(err)
	}
}

func TestSpanMemoryNotFoundAndMismatch(t *testing.T) {
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	_, in := spanFixture(t, 40, 0, format.DTypeF32)
	m := buildSpans(t, db, in, SpanOptions{})
	if _, err := db.PutSpanMemory(context.Background(), "ns", "ctx", m); err != nil {
		t.Fatal(err)
	}
	fp, other := m.Model.Fingerprint(), format.Fingerprint{1}
	for _, tc := range []struct {
		ns, name string
		fp       format.Fingerprint
		want     error
	}{
		{"ns", "none", fp, ErrNotFound},
		{"other", "ctx", fp, ErrNotFound},
		{"ns", "ctx", other, ErrModelMismatch},
		{"ns", "", fp, ErrInvalidArgument},
	} {
		if _, err := db.OpenSpanMemory(context.Background(), tc.ns, tc.fp, tc.name); !errors.Is(err, tc.want) {
			t.Errorf("open %q/%q: %v, want %v", tc.ns, tc.name, err, tc.want)
		}
		if err := db.DeleteSpanMemory(context.Background(), tc.ns, tc.fp, tc.name); !errors.Is(err, tc.want) {
			t.Errorf("delete %q/%q: %v, want %v", tc.ns, tc.name, err, tc.want)
		}
	}
	bad := *m
	bad.Resident = nil
	if _, err := db.PutSpanMemory(context.Background(), "ns", "bad", &bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("inconsistent memory: %v", err)
	}
}

func liveDead(db *DB) (live, dead uint64) {
	for _, f := range db.BlobFiles() {
		live += f.LiveBytes
		dead += f.DeadBytes
	}
	return live, dead
}

func TestSpanMemoryDeleteAndReplace(t *testing.T) {
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	_, in := spanFixture(t, 64, 0, format.DTypeBF16)
	m := buildSpans(t, db, in, SpanOptions{})
	r := putOpenSpan(t, db, m, "ctx")
	defer r.Release()
	if _, err := r.Head(0, 0); err != nil { // read now: stays readable after the replace
		t.Fatal(err)
	}
	size := r.Meta().ExtentLength
	if live, dead := liveDead(db); live != size || dead != 0 {
		t.Fatalf("after put: live %d dead %d, extent %d", live, dead, size)
	}
	// Replace with a one-layer model's memory: the old extent is dead and
	// the old second layer's head records are gone.
	spec := *in.Model
	spec.Layers = 1
	small := &SpanInput{Model: &spec, K: in.K[:1], V: in.V[:1], Surprisal: in.Surprisal}
	m2 := buildSpans(t, db, small, SpanOptions{})
	if _, err := db.PutSpanMemory(context.Background(), "ns", "ctx", m2); err != nil {
		t.Fatal(err)
	}
	live, dead := liveDead(db)
	if dead != size || live == 0 {
		t.Fatalf("after replace: live %d dead %d, old extent %d", live, dead, size)
	}
	if has, _ := db.cat.Has(catalog.SpanHeadKey("ns", "ctx", 1, 0)); has {
		t.Fatal("head record of the replaced memory's layer 1 survived")
	}
	// The reader opened before still reads the old bytes.
	if _, err := r.Factors(0, 0, firstFactored(t, r.Meta()), format.ChunkV); err != nil {
		t.Fatalf("reader of the replaced memory: %v", err)
	}
	if _, err := r.Head(0, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("head first read after the replace: %v", err)
	}
	if _, err := db.OpenSpanMemory(context.Background(), "ns", m.Model.Fingerprint(), "ctx"); !errors.Is(err, ErrModelMismatch) {
		t.Fatalf("open with the old model after replace: %v", err)
	}
	if err := db.DeleteSpanMemory(context.Background(), "ns", spec.Fingerprint(), "ctx"); err != nil {
		t.Fatal(err)
	}
	if live, dead2 := liveDead(db); live != 0 || dead2 <= dead {
		t.Fatalf("after delete: live %d dead %d", live, dead2)
	}
	if _, err := db.OpenSpanMemory(context.Background(), "ns", spec.Fingerprint(), "ctx"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open after delete: %v", err)
	}
}

func firstFactored(t *testing.T, m *SpanMeta) int {
	t.Helper()
	for s, sp := range m.Spans {
		if sp.Factored {
			return s
		}
	}
	t.Fatal("no factored span")
	return -1
}

func TestSpanMemoryCorruptBlock(t *testing.T) {
	for _, disk := range []bool{false, true} {
		t.Run(fmt.Sprintf("disk=%v", disk), func(t *testing.T) {
			db, fs, dir := openSpanDB(t, disk)
			_, in := spanFixture(t, 64, 0, format.DTypeF32)
			m := buildSpans(t, db, in, SpanOptions{})
			r := putOpenSpan(t, db, m, "ctx")
			s := firstFactored(t, r.Meta())
			h, err := r.Head(1, 0)
			if err != nil {
				t.Fatal(err)
			}
			path := spanmem.ReaderFile(r.in).Path()
			at := r.Meta().ExtentOffset + h.K[s].Offset + 20
			r.Release()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			flipSpanByte(t, fs, path, at)
			if db, err = Open(dir, &Options{FS: fs}); err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if r, err = db.OpenSpanMemory(context.Background(), "ns", m.Model.Fingerprint(), "ctx"); err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			if _, err := r.FactorBytes(1, 0, s, format.ChunkK); !errors.Is(err, ErrCorruption) {
				t.Fatalf("flipped factor byte: %v", err)
			}
			// Only that block is bad: its V, other heads and spans read fine.
			if _, err := r.Factors(1, 0, s, format.ChunkV); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Factors(0, 0, s, format.ChunkK); err != nil {
				t.Fatal(err)
			}
			if st := db.Stats(); st.Corruptions == 0 {
				t.Fatal("corruption not counted")
			}
		})
	}
}

// flipSpanByte flips one bit at off of a file of a closed store.
func flipSpanByte(t *testing.T, fs vfs.FS, path string, off uint64) {
	t.Helper()
	if mem, ok := fs.(*vfs.MemFS); ok {
		b, err := mem.UnsafeGetFileDataBuffer(path)
		if err != nil {
			t.Fatal(err)
		}
		b[off] ^= 0x08
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x08
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSpanMemoryCrash(t *testing.T) {
	// A crash right after PutSpanMemory returns keeps the memory whole; a
	// crash before its catalog batch leaves no trace and the store writes on.
	mem := vfs.NewCrashableMem()
	db, err := Open("/db", &Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	_, in := spanFixture(t, 48, 0, format.DTypeF32)
	m := buildSpans(t, db, in, SpanOptions{})
	before := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if _, err := db.PutSpanMemory(context.Background(), "ns", "ctx", m); err != nil {
		t.Fatal(err)
	}
	after := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	_ = db.Close()
	for _, tc := range []struct {
		name string
		fs   *vfs.MemFS
		want error
	}{{"after", after, nil}, {"before", before, ErrNotFound}} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open("/db", &Options{FS: tc.fs})
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			r, err := db.OpenSpanMemory(context.Background(), "ns", m.Model.Fingerprint(), "ctx")
			if !errors.Is(err, tc.want) {
				t.Fatalf("%s: open: %v, want %v", tc.name, err, tc.want)
			}
			if err == nil {
				checkSpanHead(t, r, m, in, 1, 1)
				r.Release()
			} else if _, err := db.PutSpanMemory(context.Background(), "ns", "ctx", m); err != nil {
				t.Fatalf("%s: put after the crash: %v", tc.name, err)
			}
			_ = db.Close()
		})
	}
}

// subset reports whether every element of a (ascending) is in b (ascending).
func subset(a, b []int) bool {
	j := 0
	for _, t := range a {
		for j < len(b) && b[j] < t {
			j++
		}
		if j == len(b) || b[j] != t {
			return false
		}
	}
	return true
}

// TestSpanMemorySize: BuildSpanMemory's defaults make memories no larger
// than their rows. On the fixture at its default segmentation (rows of
// rank 4 or less, 16-dim heads) over 400 tokens and more, the memory is
// built, at most its raw bf16 rows with every stored byte counted (Size's
// extent is the one PutSpanMemory writes, its records the ones it
// writes), every factored span smaller than its rows in bf16; with noise
// in tokens 200 to 400 their spans stay resident as one span (with
// KeepResidentSpans as the segmentation cut them, each with its records
// counted), and the memory reads back as built; a context
// of 16 tokens cannot pay for a memory's fixed bytes (its rows take 4 KiB
// in bf16, the least an extent takes, before any record), and rows of
// noise do not compress: both are refused (ErrSpanNotSmaller), and built
// with FactorAll.
func TestSpanMemorySize(t *testing.T) {
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	for _, tokens := range []int{400, 1000} {
		_, in := spanFixture(t, tokens, 0, format.DTypeBF16)
		m, err := db.BuildSpanMemory(in, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkSpanSize(t, db, m, fmt.Sprintf("sized-%d", tokens))
	}
	// Noise in the middle: its spans stay resident, merged into one, and
	// the memory reads back as built.
	_, mixed := spanFixture(t, 600, 0, format.DTypeBF16)
	rng := rand.New(rand.NewPCG(5, 6))
	hd := mixed.Model.HeadDim
	for _, x := range append(slices.Clone(mixed.K), mixed.V...) {
		for h := range mixed.Model.KVHeads {
			for i := (h*600 + 200) * hd; i < (h*600+400)*hd; i++ {
				x[i] = float32(rng.NormFloat64())
			}
		}
	}
	m, err := db.BuildSpanMemory(mixed, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSpanSize(t, db, m, "ctx-1")
	merged := false
	for _, sp := range m.Segmentation.Spans {
		merged = merged || (!sp.Factored && sp.Start <= 200 && sp.End >= 400)
	}
	if !merged {
		t.Errorf("no one resident span holds the noise, tokens 200 to 400: spans %v", m.Segmentation.Spans)
	}
	checkSpanReader(t, db, m, mixed)
	// With KeepResidentSpans the noise stays in the spans the
	// segmentation cut, neighbours resident side by side, each with its
	// records counted, and the memory still fits and reads back.
	keptDB, _, _ := openSpanDB(t, false)
	defer keptDB.Close()
	kept, err := keptDB.BuildSpanMemory(mixed, &SpanOptions{KeepResidentSpans: true})
	if err != nil {
		t.Fatal(err)
	}
	checkSpanSize(t, keptDB, kept, "ctx-1")
	var inNoise int
	for _, sp := range kept.Segmentation.Spans {
		if sp.Start >= 200 && sp.End <= 400 && !sp.Factored {
			inNoise++
		}
	}
	if inNoise < 2 || len(kept.Segmentation.Spans) <= len(m.Segmentation.Spans) {
		t.Errorf("KeepResidentSpans: %d resident spans within the noise, %d spans against %d merged", inNoise, len(kept.Segmentation.Spans), len(m.Segmentation.Spans))
	}
	ks, err := kept.Size()
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := m.Size(); err != nil || ks.Stored() < ms.Stored() {
		t.Errorf("KeepResidentSpans: %d bytes stored, fewer than the merged memory's %d (%v)", ks.Stored(), ms.Stored(), err)
	}
	checkSpanReader(t, keptDB, kept, mixed)

	_, short := spanFixture(t, 16, 0, format.DTypeBF16)
	noise := spanNoise(t, 600)
	for _, in := range []*SpanInput{short, noise} {
		if _, err := db.BuildSpanMemory(in, nil); !errors.Is(err, ErrSpanNotSmaller) {
			t.Errorf("%d tokens: %v, want ErrSpanNotSmaller", len(in.Surprisal), err)
		}
		if _, err := db.BuildSpanMemory(in, &SpanOptions{FactorAll: true}); err != nil {
			t.Errorf("%d tokens, FactorAll: %v", len(in.Surprisal), err)
		}
	}
}

// spanNoise is a context of Gaussian rows for the fixture's model shape:
// no factors of fewer than 16 components hold them.
func spanNoise(t *testing.T, tokens int) *SpanInput {
	_, in := spanFixture(t, tokens, 0, format.DTypeBF16)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, x := range append(slices.Clone(in.K), in.V...) {
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
	}
	return in
}

// checkSpanSize checks memory m built with the size rule and puts it as
// name.
func checkSpanSize(t *testing.T, db *DB, m *SpanMemory, name string) {
	t.Helper()
	if m.FactorDType != DefaultSpanFactorDType || DefaultSpanFactorDType != format.DTypeF16 {
		t.Fatalf("factor dtype %v, default %v; want f16", m.FactorDType, DefaultSpanFactorDType)
	}
	size, err := m.Size()
	if err != nil {
		t.Fatal(err)
	}
	spec := &m.Model
	if want := int64(m.Tokens * spec.Layers * spec.KVHeads * spec.HeadDim * 4); size.RawBF16 != want || size.Raw != want {
		t.Errorf("raw bf16 %d bytes, raw %d, want %d", size.RawBF16, size.Raw, want)
	}
	if size.Stored() > size.RawBF16 {
		t.Errorf("stored %d bytes, more than the raw bf16 rows' %d", size.Stored(), size.RawBF16)
	}
	if _, err := db.PutSpanMemory(context.Background(), "ns", name, m); err != nil {
		t.Fatal(err)
	}
	meta, err := db.spanMeta("ns", name)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(size.Extent) != meta.ExtentLength || size.Records <= 0 || size.Stored() != size.Extent+size.Records {
		t.Errorf("size %+v, stored extent %d bytes", size, meta.ExtentLength)
	}
	factored := 0
	for s, sp := range m.Segmentation.Spans {
		if !sp.Factored {
			continue
		}
		factored++
		var bytes int64
		for _, h := range m.Heads {
			bytes += spanmem.FactorBytes(h.K[s].Rows, h.K[s].Cols, h.K[s].Rank, m.FactorDType)
			bytes += spanmem.FactorBytes(h.V[s].Rows, h.V[s].Cols, h.V[s].Rank, m.FactorDType)
		}
		if raw := int64(sp.Len() * spec.Layers * spec.KVHeads * spec.HeadDim * 4); bytes >= raw {
			t.Errorf("span %d: %d bytes of factors for %d of bf16 rows", s, bytes, raw)
		}
	}
	if factored == 0 {
		t.Error("the fixture factors no span")
	}
	t.Logf("%d tokens, %d of %d spans factored: stored %d bytes (extent %d, records %d), raw bf16 %d: %.3f", m.Tokens, factored,
		len(m.Segmentation.Spans), size.Stored(), size.Extent, size.Records, size.RawBF16, float64(size.Stored())/float64(size.RawBF16))
}
