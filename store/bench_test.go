package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/view"
)

// Benchmarks on the reference shape of DESIGN.md: a 1,000-token
// Llama-3.1-8B packet in bf16 (32 layers, 8 KV heads, head dim 128), 125
// MiB. They run on the OS file system under b.TempDir (set TMPDIR to move
// them). Compare kvstore with the plain-file and memcpy baselines in the
// same run:
//
//	go test -run '^$' -bench '^Benchmark(Put|PutPaired|Get|Read|ReadPaired)$' -benchtime 10x ./store/
//
// On a shared machine trust the Paired benchmarks' ratios: they alternate
// the baseline and kvstore within each iteration.

// llamaPacket returns the reference packet.
func llamaPacket(b *testing.B) *Packet {
	b.Helper()
	spec := &format.ModelSpec{
		Architecture: "llama", Layers: 32, KVHeads: 8, HeadDim: 128, DType: format.DTypeBF16,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
			Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192},
		WeightsID: "meta-llama/Llama-3.1-8B",
	}
	return randPacket(spec, "bench", 1000, 1)
}

func packetBytes(p *Packet) int64 { return int64(2 * len(p.Layers) * len(p.Layers[0].K)) }

// results of baselines, for ratios reported by the kvstore benchmarks
// (sub-benchmarks run in order within one process).
var baseline = map[string]float64{} // name -> ns per byte

func recordBaseline(b *testing.B, name string, bytes int64) {
	baseline[name] = float64(b.Elapsed().Nanoseconds()) / float64(int64(b.N)*bytes)
}

func reportRatio(b *testing.B, name string, bytes int64) {
	if base, ok := baseline[name]; ok {
		ours := float64(b.Elapsed().Nanoseconds()) / float64(int64(b.N)*bytes)
		b.ReportMetric(base/ours, "x-"+name)
	}
}

func BenchmarkPut(b *testing.B) {
	p := llamaPacket(b)
	n := packetBytes(p)
	b.Run("plain-file", func(b *testing.B) {
		dir := b.TempDir()
		b.SetBytes(n)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			writePlain(b, filepath.Join(dir, fmt.Sprint(i)), p)
			i++
		}
		recordBaseline(b, "plain", n)
	})
	b.Run("kvstore", func(b *testing.B) {
		db, err := Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		b.SetBytes(n)
		b.ReportAllocs()
		for b.Loop() {
			p.TokenIDs[0]++ // a new document each time
			if _, err := db.Put(context.Background(), p); err != nil {
				b.Fatal(err)
			}
		}
		reportRatio(b, "plain", n)
		s := db.Stats()
		b.ReportMetric(float64(s.BlobSyncTime.Microseconds())/float64(s.BlobSyncs), "µs/blob-sync")
		// Put's catalog batches wait for no sync; the background syncs
		// behind them (catalog.Syncer) are what CatalogSyncs counts here.
		b.ReportMetric(float64(s.CatalogSyncTime.Microseconds())/float64(max(s.CatalogSyncs, 1)), "µs/catalog-sync")
	})
}

// BenchmarkPutPaired alternates a plain-file write and a kvstore Put of the
// same bytes each iteration, so that both meet the same disk and machine
// state, and reports both rates and their ratio (x-plain, over the sums),
// with the median of the iterations' own ratios (x-plain-median), which a
// burst of load on the shared disk moves less. On a shared machine these
// ratios are the figures to trust.
func BenchmarkPutPaired(b *testing.B) { putPaired(b, llamaPacket(b)) }

// BenchmarkPutPairedSmall is BenchmarkPutPaired on a small packet, where a
// Put's fixed costs (its device flushes, the catalog batch) weigh most: 256
// tokens of a Qwen2.5-3B-shaped model (36 layers, 2 KV heads of 128, bf16),
// 9 MiB.
func BenchmarkPutPairedSmall(b *testing.B) {
	spec := &format.ModelSpec{
		Architecture: "qwen2", Layers: 36, KVHeads: 2, HeadDim: 128, DType: format.DTypeBF16,
		RoPE:      format.RoPE{Style: format.RoPERotateHalf, Theta: 1000000},
		WeightsID: "Qwen/Qwen2.5-3B",
	}
	putPaired(b, randPacket(spec, "bench", 256, 1))
}

func putPaired(b *testing.B, p *Packet) {
	n := packetBytes(p)
	dir := b.TempDir()
	db, err := Open(filepath.Join(dir, "store"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var plain, ours time.Duration
	var ratios []float64
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		path := filepath.Join(dir, fmt.Sprint(i))
		start := time.Now()
		writePlain(b, path, p)
		mid := time.Now()
		p.TokenIDs[0]++
		if _, err := db.Put(context.Background(), p); err != nil {
			b.Fatal(err)
		}
		d := time.Since(mid)
		plain, ours = plain+mid.Sub(start), ours+d
		ratios = append(ratios, mid.Sub(start).Seconds()/d.Seconds())
		i++
	}
	mbps := func(d time.Duration) float64 { return float64(n) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(plain), "plain-MB/s")
	b.ReportMetric(mbps(ours), "kvstore-MB/s")
	b.ReportMetric(plain.Seconds()/ours.Seconds(), "x-plain")
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "x-plain-median")
}

// writePlain writes p's chunks to a new file, one write each, and fsyncs
// it once: the floor for durably storing the bytes.
func writePlain(b *testing.B, path string, p *Packet) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range p.Layers {
		if _, err := f.Write(l.K); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(l.V); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// putOne opens a store on disk holding p.
func putOne(b *testing.B, p *Packet, o *Options) (*DB, format.PacketID) {
	db, err := Open(b.TempDir(), o)
	if err != nil {
		b.Fatal(err)
	}
	id, err := db.Put(context.Background(), p)
	if err != nil {
		b.Fatal(err)
	}
	return db, id
}

// BenchmarkGet measures a warm Get of the whole packet as views: a catalog
// lookup, the header decoded and checked, the extent pinned; no byte read.
func BenchmarkGet(b *testing.B) {
	p := llamaPacket(b)
	db, id := putOne(b, p, nil)
	defer db.Close()
	fp := p.Model.Fingerprint()
	b.ReportAllocs()
	for b.Loop() {
		v, err := db.Get(context.Background(), "bench", fp, id)
		if err != nil {
			b.Fatal(err)
		}
		v.Release()
	}
}

// BenchmarkRead reads every byte of the packet into a destination buffer,
// as a server fills its KV cache: memcpy from memory is the baseline;
// kvstore reads through fresh views of the mapped blob file with CRC32C
// verification each time (the verification cache is dropped every
// iteration), once verified (cache kept), and by copies (DisableMmap).
func BenchmarkRead(b *testing.B) {
	p := llamaPacket(b)
	n := packetBytes(p)
	dst := make([]byte, n)
	for i := 0; i < len(dst); i += os.Getpagesize() {
		dst[i] = 1 // fault the pages in now, not in the first timed copy
	}
	b.Run("memcpy", func(b *testing.B) {
		b.SetBytes(n)
		b.ReportAllocs()
		for b.Loop() {
			off := 0
			for _, l := range p.Layers {
				off += copy(dst[off:], l.K)
				off += copy(dst[off:], l.V)
			}
		}
		recordBaseline(b, "memcpy", n)
	})
	cases := []struct {
		name   string
		forget bool
		opts   Options
	}{
		{"views-crc", true, Options{}},
		{"views-verified", false, Options{}},
		{"copies-crc", false, Options{DisableMmap: true}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			db, id := putOne(b, p, &c.opts)
			defer db.Close()
			fp := p.Model.Fingerprint()
			readViews(b, db, fp, id, dst, false) // warm the page cache and mapping
			b.SetBytes(n)
			b.ReportAllocs()
			for b.Loop() {
				readViews(b, db, fp, id, dst, c.forget)
			}
			reportRatio(b, "memcpy", n)
		})
	}
}

// readViews copies every chunk of packet id into dst through a fresh view.
func readViews(b *testing.B, db *DB, fp format.Fingerprint, id format.PacketID, dst []byte, forget bool) {
	v, err := db.Get(context.Background(), "bench", fp, id)
	if err != nil {
		b.Fatal(err)
	}
	defer v.Release()
	if forget {
		view.File(v.in).ForgetVerified()
	}
	off := 0
	for i := range v.Header().Chunks {
		c, err := v.Chunk(i)
		if err != nil {
			b.Fatal(err)
		}
		off += copy(dst[off:], c)
	}
}

// BenchmarkReadPaired alternates memcpy and reads through fresh views with
// CRC32C verification each iteration, like BenchmarkPutPaired, and reports
// the rates and ratios: views-crc is Chunk then a copy (the CRC a pass of
// its own), copy-crc is CopyChunk (the CRC taken while copying).
// x-memcpy is copy-crc's ratio, x-memcpy-views views-crc's.
func BenchmarkReadPaired(b *testing.B) {
	p := llamaPacket(b)
	n := packetBytes(p)
	dst := make([]byte, n)
	for i := 0; i < len(dst); i += os.Getpagesize() {
		dst[i] = 1
	}
	db, id := putOne(b, p, nil)
	defer db.Close()
	fp := p.Model.Fingerprint()
	readViews(b, db, fp, id, dst, false)
	var plain, views, copies time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		off := 0
		for _, l := range p.Layers {
			off += copy(dst[off:], l.K)
			off += copy(dst[off:], l.V)
		}
		t1 := time.Now()
		readViews(b, db, fp, id, dst, true)
		t2 := time.Now()
		copyViews(b, db, fp, id, dst)
		plain, views, copies = plain+t1.Sub(start), views+t2.Sub(t1), copies+time.Since(t2)
	}
	mbps := func(d time.Duration) float64 { return float64(n) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(plain), "memcpy-MB/s")
	b.ReportMetric(mbps(views), "views-crc-MB/s")
	b.ReportMetric(mbps(copies), "copy-crc-MB/s")
	b.ReportMetric(plain.Seconds()/copies.Seconds(), "x-memcpy")
	b.ReportMetric(plain.Seconds()/views.Seconds(), "x-memcpy-views")
}

// copyViews copies every chunk of packet id into dst through a fresh view
// with CopyChunk, the verification cache dropped first.
func copyViews(b *testing.B, db *DB, fp format.Fingerprint, id format.PacketID, dst []byte) {
	v, err := db.Get(context.Background(), "bench", fp, id)
	if err != nil {
		b.Fatal(err)
	}
	defer v.Release()
	view.File(v.in).ForgetVerified()
	off := 0
	for i := range v.Header().Chunks {
		n, err := v.CopyChunk(dst[off:], i)
		if err != nil {
			b.Fatal(err)
		}
		off += n
	}
}
