//go:build ignore

// mkfrozen writes a small store with the store package of the checkout it
// runs in, and a manifest of what the store holds as that code reads it
// back: the frozen stores of store/testdata/format-*/ (README.md there
// says which commit wrote each). Run it from the repository root of that
// checkout, with the API shim for the version's signatures:
//
//	go run store/testdata/mkfrozen/main.go store/testdata/mkfrozen/api_ctx.go -version 1.2 -commit <hash> -out /tmp/format-1.2
//
// api_noctx.go is the shim for format 1.0 (its calls took no context).
// Everything is deterministic but the catalog's and blob files' creation
// times; the manifest holds what the frozen test compares.
package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store"
)

// Manifest is what a frozen store holds. The frozen test decodes it with
// a copy of these types.
type Manifest struct {
	Version   string     `json:"version"`
	Commit    string     `json:"commit"`
	Packets   []Packet   `json:"packets"`
	Gone      []Gone     `json:"gone"`
	Artifacts []Artifact `json:"artifacts"`
	Spans     []Span     `json:"spans"`
}

// Packet is a stored packet and the SHA-256 of its layers' K and V bytes,
// in layer order, as View.Layer returns them (decoded).
type Packet struct {
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Model     string   `json:"model"`
	ID        string   `json:"id"`
	AdapterID string   `json:"adapter_id,omitempty"`
	Tokens    int      `json:"tokens"`
	DType     string   `json:"dtype"`
	Codecs    []string `json:"codecs"`
	SHA256    string   `json:"sha256"`
}

// Gone is a packet deleted or evicted: reads say ErrNotFound.
type Gone struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Model     string `json:"model"`
	ID        string `json:"id"`
	Why       string `json:"why"` // "deleted" or "evicted"
}

// Artifact is a stored artifact and the SHA-256 of its data.
type Artifact struct {
	Model  string `json:"model"`
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// Span is a stored span memory and the SHA-256 of each block: every
// layer's resident K and V, every factored span's K and V factors per
// (layer, head).
type Span struct {
	Namespace string            `json:"namespace"`
	Model     string            `json:"model"`
	Name      string            `json:"name"`
	Tokens    int               `json:"tokens"`
	Spans     int               `json:"spans"`
	Blocks    map[string]string `json:"blocks"`
}

var (
	specA = &format.ModelSpec{Architecture: "llama", Layers: 2, KVHeads: 2, HeadDim: 8, DType: format.DTypeF32,
		WeightsID: "frozen-a", RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}}
	specB = &format.ModelSpec{Architecture: "llama", Layers: 2, KVHeads: 1, HeadDim: 16, DType: format.DTypeBF16,
		WeightsID: "frozen-b", RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000}}
)

// packet is a deterministic packet: element values from a small set, so
// that shuffle-zstd has something to compress.
func packet(spec *format.ModelSpec, ns string, first uint32, n int, seed uint64) *store.Packet {
	p := &store.Packet{Namespace: ns, Model: spec}
	for i := range n {
		p.TokenIDs = append(p.TokenIDs, first+uint32(i))
	}
	fill(p, seed)
	return p
}

// fill sets p's layers for its tokens.
func fill(p *store.Packet, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	spec := p.Model
	elems := spec.KVHeads * p.Tokens() * spec.HeadDim
	p.Layers = nil
	for range spec.Layers {
		var l store.Layer
		for _, dst := range []*[]byte{&l.K, &l.V} {
			b := make([]byte, elems*spec.DType.Size())
			for i := range elems {
				x := float32(rng.IntN(16)-8) / 4
				switch spec.DType {
				case format.DTypeF32:
					binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
				case format.DTypeBF16:
					binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(x)>>16))
				}
			}
			*dst = b
		}
		p.Layers = append(p.Layers, l)
	}
}

// spanInput is a deterministic 48-token context of specA with surprisal
// peaks, so that it splits into factored and unfactored spans.
func spanInput() *store.SpanInput {
	const tokens = 48
	rng := rand.New(rand.NewPCG(5, 9))
	in := &store.SpanInput{Model: specA, BasePosition: 3, Surprisal: make([]float32, tokens)}
	for range specA.Layers {
		for _, dst := range []*[][]float32{&in.K, &in.V} {
			x := make([]float32, specA.KVHeads*tokens*specA.HeadDim)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			*dst = append(*dst, x)
		}
	}
	for i := range in.Surprisal {
		in.Surprisal[i] = 1
	}
	for _, i := range []int{9, 20, 27, 40} {
		in.Surprisal[i] = 9
	}
	return in
}

func main() {
	out := flag.String("out", "", "directory to write: out/store and out/manifest.json")
	version := flag.String("version", "", "the format version this checkout writes, for the manifest")
	commit := flag.String("commit", "", "the commit of this checkout, for the manifest")
	flag.Parse()
	if *out == "" || *version == "" {
		log.Fatal("-out and -version are required")
	}
	if err := run(*out, *version, *commit); err != nil {
		log.Fatal(err)
	}
}

func run(out, version, commit string) error {
	dir := filepath.Join(out, "store")
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists", dir)
	}
	opts := &store.Options{CatalogMemTableSize: 1 << 20}
	db, err := store.Open(dir, opts)
	if err != nil {
		return err
	}
	type named struct {
		name string
		p    *store.Packet
	}
	adapter := &store.Packet{Namespace: "docs", Model: specA, AdapterID: "v1", HeaderTokens: 2, TrailerTokens: 1, TokenIDs: []uint32{80, 81, 82, 83}}
	fill(adapter, 4)
	zstd := packet(specB, "docs", 20, 12, 2)
	zstd.Codec = format.CodecShuffleZstd
	int8p := packet(specA, "chat", 40, 32, 3)
	int8p.Codec = format.CodecInt8
	puts := []named{
		{"victim", packet(specA, "docs", 1, 6, 0)},
		{"raw", packet(specA, "docs", 10, 8, 1)},
		{"zstd", zstd},
		{"int8", int8p},
		{"adapter", adapter},
		{"deleted", packet(specB, "chat", 90, 5, 5)},
	}
	adapterData := make([]byte, 64)
	for i := range adapterData {
		adapterData[i] = byte(i * 7)
	}
	if err := db.PutArtifact(specA.Fingerprint(), store.AdapterArtifact("v1"), adapterData,
		store.ArtifactMeta{DType: format.DTypeU8, Shape: []int{64}, Note: "frozen adapter"}); err != nil {
		return err
	}
	m := &Manifest{Version: version, Commit: commit}
	ids := map[string]format.PacketID{}
	var victimBytes uint64
	for _, n := range puts {
		before := db.Stats().LiveBytes
		id, err := put(db, n.p)
		if err != nil {
			return fmt.Errorf("put %s: %w", n.name, err)
		}
		ids[n.name] = id
		if n.name == "victim" {
			victimBytes = db.Stats().LiveBytes - before
		}
	}
	mem, err := db.BuildSpanMemory(spanInput(), &store.SpanOptions{Segment: segment.Options{MinSpan: 4, MaxSpan: 16, MinFactored: 8}})
	if err != nil {
		return fmt.Errorf("build span memory: %w", err)
	}
	if err := putSpan(db, "docs", "ctx-1", mem); err != nil {
		return fmt.Errorf("put span memory: %w", err)
	}
	deleted := puts[5]
	if err := del(db, deleted.p.Namespace, deleted.p.Model.Fingerprint(), ids[deleted.name]); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	m.Gone = append(m.Gone, Gone{Name: deleted.name, Namespace: deleted.p.Namespace, Model: deleted.p.Model.Fingerprint().String(),
		ID: ids[deleted.name].String(), Why: "deleted"})
	// Read every packet but the victim, so that it is the least recently
	// used one, then evict it: MaxBytes one byte short of room for a
	// packet of its size.
	for _, n := range puts[1:5] {
		v, err := get(db, n.p.Namespace, n.p.Model.Fingerprint(), ids[n.name])
		if err != nil {
			return err
		}
		v.Release()
	}
	live := db.Stats().LiveBytes
	if err := db.Close(); err != nil {
		return err
	}
	opts.MaxBytes = int64(live + victimBytes - 1)
	if db, err = store.Open(dir, opts); err != nil {
		return err
	}
	last := named{"last", packet(specA, "docs", 100, 6, 6)}
	puts = append(puts, last)
	if ids[last.name], err = put(db, last.p); err != nil {
		return fmt.Errorf("put %s: %w", last.name, err)
	}
	if db.Stats().Evictions == 0 {
		return fmt.Errorf("the last put evicted nothing")
	}
	for _, n := range puts {
		if n.name == deleted.name {
			continue
		}
		fp := n.p.Model.Fingerprint()
		ok, err := has(db, n.p.Namespace, fp, ids[n.name])
		if err != nil {
			return err
		}
		if !ok {
			m.Gone = append(m.Gone, Gone{Name: n.name, Namespace: n.p.Namespace, Model: fp.String(), ID: ids[n.name].String(), Why: "evicted"})
			continue
		}
		v, err := get(db, n.p.Namespace, fp, ids[n.name])
		if err != nil {
			return err
		}
		h := v.Header()
		sum := sha256.New()
		codecs := map[string]bool{}
		for l := range v.Layers() {
			k, val, err := v.Layer(l)
			if err != nil {
				v.Release()
				return err
			}
			sum.Write(k)
			sum.Write(val)
		}
		for _, c := range h.Chunks {
			codecs[c.Codec.String()] = true
		}
		v.Release()
		var cs []string
		for c := range codecs {
			cs = append(cs, c)
		}
		slices.Sort(cs)
		m.Packets = append(m.Packets, Packet{Name: n.name, Namespace: n.p.Namespace, Model: fp.String(), ID: ids[n.name].String(),
			AdapterID: n.p.AdapterID, Tokens: int(h.Tokens), DType: h.DType.String(), Codecs: cs, SHA256: hex.EncodeToString(sum.Sum(nil))})
	}
	for _, spec := range []*format.ModelSpec{specA, specB} {
		names, err := db.ListArtifacts(spec.Fingerprint())
		if err != nil {
			return err
		}
		for _, name := range names {
			data, err := db.GetArtifact(spec.Fingerprint(), name)
			if err != nil {
				return err
			}
			m.Artifacts = append(m.Artifacts, Artifact{Model: spec.Fingerprint().String(), Name: name, SHA256: hash(data)})
		}
	}
	r, err := openSpan(db, "docs", specA.Fingerprint(), "ctx-1")
	if err != nil {
		return err
	}
	meta := r.Meta()
	sp := Span{Namespace: "docs", Model: specA.Fingerprint().String(), Name: "ctx-1", Tokens: int(meta.Tokens), Spans: len(meta.Spans),
		Blocks: map[string]string{}}
	for l := range int(meta.Layers) {
		k, v, err := r.Resident(l)
		if err != nil {
			return err
		}
		sp.Blocks[fmt.Sprintf("resident %d K", l)] = hash(k)
		sp.Blocks[fmt.Sprintf("resident %d V", l)] = hash(v)
		for h := range int(meta.KVHeads) {
			for s, span := range meta.Spans {
				if !span.Factored {
					continue
				}
				for _, kind := range []format.ChunkKind{format.ChunkK, format.ChunkV} {
					b, err := r.FactorBytes(l, h, s, kind)
					if err != nil {
						return err
					}
					sp.Blocks[fmt.Sprintf("factors %d %d %d %v", l, h, s, kind)] = hash(b)
				}
			}
		}
	}
	r.Release()
	m.Spans = append(m.Spans, sp)
	if err := db.Close(); err != nil {
		return err
	}
	// The space reserve is no content, and a store opened without it
	// makes one again.
	if err := os.Remove(filepath.Join(dir, "RESERVE")); err != nil && !os.IsNotExist(err) {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "manifest.json"), append(b, '\n'), 0o644)
}

func hash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
