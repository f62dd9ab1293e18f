package catalog

import (
	"errors"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// testHeader is a minimal encodable header of the packet of token tok in ns.
func testHeader(ns string, tok uint32) *format.PacketHeader {
	fp := format.Fingerprint{9}
	return &format.PacketHeader{Version: format.FormatMajor, Namespace: ns, ID: format.ComputePacketID(ns, fp, "", []uint32{tok}),
		Model: fp, Tokens: 1, TokenIDs: []uint32{tok}, Layers: 1, KVHeads: 1, HeadDim: 8, DType: format.DTypeF32,
		BlobFile: 1, ExtentOffset: 4096, ExtentLength: 8192,
		Chunks: []format.ChunkDesc{
			{Kind: format.ChunkK, DType: format.DTypeF32, Shape: []uint32{1, 1, 8}, Codec: format.CodecRaw, BlobFile: 1, Offset: 8192, Length: 32, RawLength: 32},
			{Kind: format.ChunkV, DType: format.DTypeF32, Shape: []uint32{1, 1, 8}, Codec: format.CodecRaw, BlobFile: 1, Offset: 8192 + 64, Length: 32, RawLength: 32},
		}}
}

func putHeaders(t *testing.T, c *Catalog, hs ...*format.PacketHeader) {
	t.Helper()
	b := c.DB.NewBatch()
	defer b.Close()
	for _, h := range hs {
		v, err := format.EncodeHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		_ = b.Set(HeaderKey(h.Namespace, h.ID), v, nil)
	}
	if err := c.Commit(b); err != nil {
		t.Fatal(err)
	}
}

// TestHeader: Header reads back a stored header, reports an absent one as
// not found, and refuses as ErrCorruption one that does not decode or
// names another packet than its key.
func TestHeader(t *testing.T) {
	c, err := openMem(t, vfs.NewMem(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h1 := testHeader("ns", 1)
	putHeaders(t, c, h1)
	if h, found, err := c.Header("ns", h1.ID); err != nil || !found || h.ID != h1.ID || h.Namespace != "ns" {
		t.Fatalf("stored header: %+v %v %v", h, found, err)
	}
	if h, found, err := c.Header("other", h1.ID); err != nil || found || h != nil {
		t.Fatalf("header in another namespace: %+v %v %v", h, found, err)
	}
	if h, found, err := c.Header("ns", format.PacketID{2}); err != nil || found || h != nil {
		t.Fatalf("absent header: %+v %v %v", h, found, err)
	}
	wrong, _ := format.EncodeHeader(testHeader("ns", 3))
	b := c.DB.NewBatch()
	_ = b.Set(HeaderKey("ns", format.PacketID{4}), wrong, nil)
	_ = b.Set(HeaderKey("ns", format.PacketID{5}), []byte("junk"), nil)
	if err := c.Commit(b); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	for _, id := range []byte{4, 5} {
		if _, _, err := c.Header("ns", format.PacketID{id}); !errors.Is(err, format.ErrCorruption) {
			t.Fatalf("header under packet %d's key: %v", id, err)
		}
	}
}

// TestModel: AddModel adds a spec once, Model reads it back, reports an
// absent one as not found, and refuses as ErrCorruption a spec under
// another fingerprint's key.
func TestModel(t *testing.T) {
	c, err := openMem(t, vfs.NewMem(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := &format.ModelSpec{Architecture: "test", Layers: 2, KVHeads: 1, HeadDim: 8, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, WeightsID: "w"}
	fp := m.Fingerprint()
	if _, found, err := c.Model(fp); found || err != nil {
		t.Fatalf("absent model: %v %v", found, err)
	}
	b := c.DB.NewBatch()
	if err := c.AddModel(b, fp, m); err != nil || b.Count() != 1 {
		t.Fatalf("add model: %v, %d sets", err, b.Count())
	}
	if err := c.Commit(b); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	got, found, err := c.Model(fp)
	if err != nil || !found || got.Fingerprint() != fp || got.Layers != 2 {
		t.Fatalf("stored model: %+v %v %v", got, found, err)
	}
	b = c.DB.NewBatch()
	defer b.Close()
	if err := c.AddModel(b, fp, m); err != nil || b.Count() != 0 {
		t.Fatalf("add of a catalogued model: %v, %d sets", err, b.Count())
	}
	v, _ := format.EncodeModelSpec(m)
	_ = b.Set(ModelKey(format.Fingerprint{7}), v, nil)
	if err := c.Commit(b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Model(format.Fingerprint{7}); !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("spec under another fingerprint: %v", err)
	}
}

// TestStored: a packet indexed for the model is stored; one with only a
// header (indexed for another model) is other; an absent one is neither.
func TestStored(t *testing.T) {
	c, err := openMem(t, vfs.NewMem(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := testHeader("ns", 1)
	putHeaders(t, c, h)
	b := c.DB.NewBatch()
	_ = b.Set(IndexKey("ns", h.Model, h.ID), nil, nil)
	if err := c.Commit(b); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	for _, tc := range []struct {
		ns             string
		model          format.Fingerprint
		indexed, other bool
	}{{"ns", h.Model, true, false}, {"ns", format.Fingerprint{1}, false, true}, {"ns2", h.Model, false, false}} {
		indexed, other, err := c.Stored(tc.ns, tc.model, h.ID)
		if err != nil || indexed != tc.indexed || other != tc.other {
			t.Errorf("%s/%s: indexed %v other %v (%v), want %v %v", tc.ns, tc.model.Short(), indexed, other, err, tc.indexed, tc.other)
		}
	}
}

// TestCachedModel: CachedModel reads a spec once into the cache, serves
// it from there after, and returns copies the caller may change.
func TestCachedModel(t *testing.T) {
	c, err := openMem(t, vfs.NewMem(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := &format.ModelSpec{Architecture: "test", Layers: 2, KVHeads: 1, HeadDim: 8, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, WeightsID: "w"}
	fp := m.Fingerprint()
	var cache sync.Map
	if _, found, err := c.CachedModel(&cache, fp); found || err != nil {
		t.Fatalf("absent model: %v %v", found, err)
	}
	b := c.DB.NewBatch()
	_ = c.AddModel(b, fp, m)
	if err := c.Commit(b); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	got, found, err := c.CachedModel(&cache, fp)
	if err != nil || !found || got.Layers != 2 {
		t.Fatalf("stored model: %+v %v %v", got, found, err)
	}
	got.Layers = 99
	if cached, ok := cache.Load(fp); !ok || cached.(*format.ModelSpec).Layers != 2 {
		t.Fatalf("cache after a read and a change to the copy: %v %v", cached, ok)
	}
	cache.Store(fp, &format.ModelSpec{Layers: 5})
	if got, _, _ := c.CachedModel(&cache, fp); got.Layers != 5 {
		t.Fatalf("served %d layers, not the cached spec's", got.Layers)
	}
}

// TestLoadModels: LoadModels caches every catalogued model spec, at most
// max of them, and skips a value that does not decode or is filed under
// another fingerprint (Model still reports those).
func TestLoadModels(t *testing.T) {
	c, err := openMem(t, vfs.NewMem(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	spec := func(layers int) *format.ModelSpec {
		return &format.ModelSpec{Architecture: "test", Layers: layers, KVHeads: 1, HeadDim: 8, DType: format.DTypeF32,
			RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, WeightsID: "w"}
	}
	m2, m3, m4 := spec(2), spec(3), spec(4)
	b := c.DB.NewBatch()
	for _, m := range []*format.ModelSpec{m2, m3} {
		if err := c.AddModel(b, m.Fingerprint(), m); err != nil {
			t.Fatal(err)
		}
	}
	wrong := format.Fingerprint{0xff} // m4's spec under another fingerprint
	v, err := format.EncodeModelSpec(m4)
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Set(ModelKey(wrong), v, nil)
	bad := format.Fingerprint{0xfe}
	_ = b.Set(ModelKey(bad), []byte("not a spec"), nil)
	if err := c.Commit(b); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	var cache sync.Map
	if err := c.LoadModels(&cache, 10); err != nil {
		t.Fatal(err)
	}
	n := 0
	cache.Range(func(k, v any) bool {
		n++
		if fp := k.(format.Fingerprint); fp != v.(*format.ModelSpec).Fingerprint() || (fp != m2.Fingerprint() && fp != m3.Fingerprint()) {
			t.Errorf("cached %s -> spec of %d layers", fp.Short(), v.(*format.ModelSpec).Layers)
		}
		return true
	})
	if n != 2 {
		t.Fatalf("%d specs cached, want 2", n)
	}
	for _, fp := range []format.Fingerprint{wrong, bad} {
		if _, _, err := c.CachedModel(&cache, fp); !errors.Is(err, format.ErrCorruption) {
			t.Errorf("model %s after LoadModels: %v, want ErrCorruption", fp.Short(), err)
		}
	}
	var one sync.Map
	if err := c.LoadModels(&one, 1); err != nil {
		t.Fatal(err)
	}
	n = 0
	one.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("LoadModels with max 1 cached %d specs", n)
	}
}
