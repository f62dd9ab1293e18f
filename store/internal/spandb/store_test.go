package spandb

import (
	"errors"
	"log/slog"
	"math"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/zeebo/blake3"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

var (
	errClosed   = errors.New("test: closed")
	errNotFound = errors.New("test: not found")
	errMismatch = errors.New("test: model mismatch")
)

// host is an in-memory Host over a fixture's catalog: a registry of blob
// files and records, the model specs, and artifacts read from the catalog.
type host struct {
	fx        *fixture
	files     map[uint32]*bloblog.File
	recs      map[uint32]catalog.BlobFile
	models    map[format.Fingerprint]*format.ModelSpec
	entered   int
	fileCalls int
	noFiles   bool  // File answers nil: every file is being retired
	commitErr error // Commit fails with it
}

func (h *host) Enter() error { h.entered++; return nil }
func (h *host) Leave()       { h.entered-- }

func (h *host) File(num uint32) *bloblog.File {
	h.fileCalls++
	f := h.files[num]
	if h.noFiles || f == nil || !f.Acquire() {
		return nil
	}
	return f
}

func (h *host) Record(num uint32) (catalog.BlobFile, bool) {
	r, ok := h.recs[num]
	return r, ok
}

func (h *host) Model(fp format.Fingerprint) (*format.ModelSpec, error) {
	if m, ok := h.models[fp]; ok {
		return m, nil
	}
	return nil, errNotFound
}

func (h *host) AddModel(b *pebble.Batch, fp format.Fingerprint, m *format.ModelSpec) error {
	if _, ok := h.models[fp]; ok {
		return nil
	}
	v, err := format.EncodeModelSpec(m)
	if err != nil {
		return err
	}
	return b.Set(catalog.ModelKey(fp), v, nil)
}

func (h *host) Commit(b *pebble.Batch) error {
	if h.commitErr != nil {
		return h.commitErr
	}
	return h.fx.cat.Commit(b)
}

func (h *host) Artifacts(spec *format.ModelSpec) spanmem.Artifacts {
	return &catalogArtifacts{cat: h.fx.cat, model: spec.Fingerprint()}
}

// catalogArtifacts reads artifacts from the catalog as the store does.
type catalogArtifacts struct {
	cat   *catalog.Catalog
	model format.Fingerprint
}

func (a *catalogArtifacts) Artifact(name string) (out spanmem.Artifact, found bool, err error) {
	found, err = a.cat.Get(catalog.ArtifactKey(a.model, name), func(v []byte) error {
		body, err := format.Unseal(format.KindArtifact, v)
		if err != nil {
			return err
		}
		r, err := format.DecodeArtifact(body)
		if err != nil {
			return err
		}
		out.Data, out.Meta = append([]byte{}, body[len(body)-r.Size:]...), r.Meta
		return nil
	})
	if found {
		out.Hash = blake3.Sum256(out.Data)
	}
	return out, found, err
}

func (a *catalogArtifacts) HeadValues(string) ([]float32, error) { return nil, nil }

// noArtifacts is a model with no artifacts stored.
type noArtifacts struct{}

func (noArtifacts) Artifact(string) (spanmem.Artifact, bool, error) {
	return spanmem.Artifact{}, false, nil
}
func (noArtifacts) HeadValues(string) ([]float32, error) { return nil, nil }

// counts counts block reads.
type counts struct{ read, verified, corrupt uint64 }

func (c *counts) Read(n uint64)     { c.read += n }
func (c *counts) Verified(n uint64) { c.verified += n }
func (c *counts) Corrupt()          { c.corrupt++ }

// fixture is a catalog and a blobs/ directory on a MemFS, with a Store
// over them as the store builds one.
type fixture struct {
	fs     vfs.FS
	cat    *catalog.Catalog
	w      *bloblog.Writer
	h      *host
	s      *Store
	views  atomic.Int64
	c      counts
	syncs  int
	wrote  uint64
	syncFn func(f vfs.File) error // replaces the fdatasync when set
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	fx := &fixture{fs: vfs.NewMem()}
	if err := fx.fs.MkdirAll("blobs", 0o755); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open("catalog", &catalog.Options{FS: fx.fs, CacheSize: 1 << 20, MemTableSize: 1 << 20,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	fx.cat = cat
	fx.w = &bloblog.Writer{FS: fx.fs, Dir: "blobs", Limit: 1 << 30, Next: 1}
	fx.h = &host{fx: fx, files: map[uint32]*bloblog.File{}, recs: map[uint32]catalog.BlobFile{},
		models: map[format.Fingerprint]*format.ModelSpec{}}
	fx.s = &Store{Catalog: cat, Host: fx.h, Verify: true, Closed: errClosed, NotFound: errNotFound, ModelMismatch: errMismatch,
		Counters: &fx.c, Views: &fx.views,
		SyncData: func(f vfs.File) error {
			fx.syncs++
			if fx.syncFn != nil {
				return fx.syncFn(f)
			}
			return f.SyncData()
		},
		Wrote: func(n uint64) { fx.wrote += n }}
	return fx
}

// put stores m as (ns, name) the way the store's PutSpanMemory does, and
// installs what Write returns in the host.
func (fx *fixture) put(ns, name string, m *spanmem.Memory) (format.ContextID, []catalog.BlobFile, int64, error) {
	if err := m.Check(); err != nil {
		return format.ContextID{}, nil, 0, err
	}
	id := format.ComputeContextID(ns, m.Model.Fingerprint(), name)
	p, err := NewPut(ns, name, m, id)
	if err != nil {
		return id, nil, 0, err
	}
	if err := fx.s.Prepare(p); err != nil {
		return id, nil, 0, err
	}
	a, err := fx.w.Prepare(p.Extent.Length)
	if err != nil {
		return id, nil, 0, err
	}
	if a.Fresh {
		fx.h.files[a.Num] = bloblog.NewFile(fx.fs, "blobs", a.Num, false, 0, slog.New(slog.DiscardHandler))
		fx.h.recs[a.Num] = catalog.BlobFile{Num: a.Num, Size: a.End}
	}
	recs, added, err := fx.s.Write(p, a, fx.w.Sealed)
	if err != nil {
		if a.Fresh {
			fx.h.files[a.Num].Release()
			delete(fx.h.files, a.Num)
			delete(fx.h.recs, a.Num)
		}
		fx.w.Abandon()
		return id, nil, 0, err
	}
	fx.w.Committed(p.Extent.Length)
	for _, r := range recs {
		fx.h.recs[r.Num] = r
	}
	spec := m.Model
	fx.h.models[spec.Fingerprint()] = &spec
	return id, recs, added, nil
}

// testModel is a small random Llama (head dim 16, GQA) whose prefill gives
// real RoPE'd keys and surprisals.
var testModel = llama.Config{Dim: 64, Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 64, SeqLen: 4096,
	NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}}

// memory builds the span memory of a prefill of tokens tokens of
// testModel (seed picks the tokens) with the artifacts stored in fx; with
// none (fx nil, or before the first put) its W is fitted and carried in
// the memory.
func memory(t *testing.T, fx *fixture, tokens, seed int) *spanmem.Memory {
	t.Helper()
	lm, err := llama.Random(testModel, 11)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int, tokens)
	for i := range ids {
		ids[i] = (i*i*7 + i*3 + seed) % lm.Vocab
	}
	res, err := lm.Forward(ids, 0, nil, llama.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := &spanmem.Input{Model: lm.Spec(format.DTypeBF16, "spandb-test"), Surprisal: make([]float32, tokens)}
	in.Surprisal[0] = float32(math.NaN())
	for i := 1; i < tokens; i++ {
		in.Surprisal[i] = float32(res.Surprisal[i-1])
	}
	for _, kv := range res.Cache.Layers {
		in.K, in.V = append(in.K, kv.K), append(in.V, kv.V)
	}
	o := spanmem.Options{Segment: segment.Options{MinSpan: 8, MaxSpan: 16, MinFactored: 12}, ProjectionDim: 4,
		FactorAll: true} // random rows do not compress; the tests need factored spans
	var arts spanmem.Artifacts = noArtifacts{}
	if fx != nil {
		arts = fx.h.Artifacts(in.Model)
	}
	m, err := spanmem.Build(in, &o, arts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMeta(t *testing.T) {
	fx := newFixture(t)
	m := memory(t, fx, 64, 1)
	id, _, _, err := fx.put("ns", "a", m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fx.s.Meta("ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Context != id || got.Model != m.Model.Fingerprint() || got.Tokens != 64 || got.BlobFile != 1 {
		t.Fatalf("root record: context %s model %s, %d tokens in file %d", got.Context.Short(), got.Model.Short(), got.Tokens, got.BlobFile)
	}
	if _, err := fx.s.Meta("ns", "b"); !errors.Is(err, errNotFound) {
		t.Fatalf("absent memory: %v, want the store's not-found error", err)
	}
	if _, err := fx.s.Meta("other", "a"); !errors.Is(err, errNotFound) {
		t.Fatalf("memory of another namespace: %v, want the store's not-found error", err)
	}
	// The root of "a" copied under the key of "b" names another context.
	var v []byte
	if _, err := fx.cat.Get(catalog.SpanMetaKey("ns", "a"), func(b []byte) error { v = append(v, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := fx.cat.DB.Set(catalog.SpanMetaKey("ns", "b"), v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.s.Meta("ns", "b"); !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("root under another context's key: %v, want ErrCorruption", err)
	}
	if err := fx.cat.DB.Set(catalog.SpanMetaKey("ns", "c"), []byte("not a record"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.s.Meta("ns", "c"); !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("root that does not decode: %v, want ErrCorruption", err)
	}
}
