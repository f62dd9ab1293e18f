package store_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/bench"
	"github.com/kvstore/kvstore/store"
)

// coldCodecs are the codecs the load benchmarks compare.
var coldCodecs = []format.Codec{format.CodecRaw, format.CodecShuffleZstd, format.CodecInt8, format.CodecInt4, format.CodecLowRank}

// kvLikePacket is a packet of KV-like bf16 data: per (layer, K|V) each
// channel has its own offset and log-normal scale, every 37th channel a
// 15x outlier, as codec's benchmarks use.
func kvLikePacket(spec *format.ModelSpec, tokens int, c format.Codec) *store.Packet {
	rng := rand.New(rand.NewPCG(1, 2))
	p := &store.Packet{PacketDesc: format.PacketDesc{Namespace: "cold", Model: spec, TokenIDs: make([]uint32, tokens), Codec: c}}
	if c == format.CodecLowRank {
		p.CodecOptions.Rank = 32 // a fixed rank: by energy, every head would be an exact SVD
	}
	n := spec.KVHeads * tokens * spec.HeadDim
	f := make([]float32, n)
	for range spec.Layers {
		var l store.Layer
		for _, dst := range []*[]byte{&l.K, &l.V} {
			scale, off := make([]float64, spec.HeadDim), make([]float64, spec.HeadDim)
			for ch := range scale {
				scale[ch], off[ch] = math.Exp(rng.NormFloat64()*0.5), rng.NormFloat64()
				if ch%37 == 0 {
					scale[ch] *= 15
				}
			}
			for i := range f {
				ch := i % spec.HeadDim
				f[i] = float32(off[ch] + scale[ch]*rng.NormFloat64())
			}
			*dst = make([]byte, n*2)
			if err := format.FromF32(*dst, f, spec.DType); err != nil {
				panic(err)
			}
		}
		p.Layers = append(p.Layers, l)
	}
	return p
}

// BenchmarkAssembleCold measures the effective load bandwidth of each
// codec from a cold disk: raw-equivalent bytes delivered to Assemble per
// second of wall time, the store reopened and its files' page cache
// dropped (fsync + posix_fadvise(DONTNEED), no mapping left) before each
// run. One Qwen2.5-3B-shaped packet (36 layers x 2 KV heads x 128, bf16)
// of KVSTORE_COLD_TOKENS tokens (default 4096: 151 MB raw) in a directory
// under KVSTORE_BENCH_DIR (default: the system temporary directory, which
// must be on a disk, not tmpfs). Set KVSTORE_LONG=1 to run it.
func BenchmarkAssembleCold(b *testing.B) {
	if os.Getenv("KVSTORE_LONG") == "" {
		b.Skip("set KVSTORE_LONG=1: writes and cold-reads a 151 MB packet per codec")
	}
	tokens := 4096
	if s := os.Getenv("KVSTORE_COLD_TOKENS"); s != "" {
		if _, err := fmt.Sscan(s, &tokens); err != nil {
			b.Fatal(err)
		}
	}
	spec := &format.ModelSpec{Architecture: "qwen2.5-3b-shape", Layers: 36, KVHeads: 2, HeadDim: 128, DType: format.DTypeBF16,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 1000000}, WeightsID: "bench"}
	for _, c := range coldCodecs {
		b.Run(c.String(), func(b *testing.B) { benchCold(b, spec, tokens, c) })
	}
}

// BenchmarkAssembleWarm is BenchmarkAssembleCold with the page cache warm
// and the store open (chunks verified once, then remembered): what is left
// is decoding, rotating and placing, the CPU side of a cold load. 1,024
// tokens (37.7 MB raw).
func BenchmarkAssembleWarm(b *testing.B) {
	spec := &format.ModelSpec{Architecture: "qwen2.5-3b-shape", Layers: 36, KVHeads: 2, HeadDim: 128, DType: format.DTypeBF16,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 1000000}, WeightsID: "bench"}
	const tokens = 1024
	for _, c := range coldCodecs {
		b.Run(c.String(), func(b *testing.B) {
			db, err := store.Open(b.TempDir(), &store.Options{FS: vfs.Default})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			id, err := db.Put(context.Background(), kvLikePacket(spec, tokens, c))
			if err != nil {
				b.Fatal(err)
			}
			d := store.NewContiguousDest(spec, tokens)
			items := []store.AssembleItem{{ID: id, Offset: 100}}
			b.SetBytes(int64(2 * spec.Layers * len(d.K[0])))
			b.ReportAllocs()
			for b.Loop() {
				if err := db.Assemble(context.Background(), "cold", spec.Fingerprint(), items, d, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchCold(b *testing.B, spec *format.ModelSpec, tokens int, c format.Codec) {
	dir, err := os.MkdirTemp(os.Getenv("KVSTORE_BENCH_DIR"), "cold")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	opts := &store.Options{FS: vfs.Default}
	db, err := store.Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	p := kvLikePacket(spec, tokens, c)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		b.Fatal(err)
	}
	raw, stored := 0, 0
	if v, err := db.Get(context.Background(), "cold", spec.Fingerprint(), id); err == nil {
		for _, ch := range v.Header().Chunks {
			raw, stored = raw+int(ch.RawLength), stored+int(ch.Length)
		}
		v.Release()
	}
	db.Close()
	d := store.NewContiguousDest(spec, tokens)
	b.SetBytes(int64(raw))
	b.ReportAllocs()
	b.ResetTimer()
	var wall time.Duration
	for range b.N {
		b.StopTimer()
		if err := bench.DropCache(dir); err != nil {
			b.Fatal(err)
		}
		db, err := store.Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		err = db.Assemble(context.Background(), "cold", spec.Fingerprint(), []store.AssembleItem{{ID: id, Offset: 100}}, d, nil)
		wall += time.Since(t0)
		b.StopTimer()
		db.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(stored)/float64(raw), "stored/raw")
	b.ReportMetric(float64(raw)*float64(b.N)/wall.Seconds()/1e9, "effGB/s")
}
