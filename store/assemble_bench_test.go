package store

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/view"
)

// BenchmarkAssemble measures Assemble of 10 Llama-3.1-8B-shaped 1,000-token
// bf16 packets (1.22 GiB) from a warm store (on disk under b.TempDir,
// mmapped, CRCs already verified) into one contiguous destination, against
// a plain copy of the same bytes from the same mappings into the same
// destination, with one goroutine and with GOMAXPROCS: each iteration runs
// the copy (untimed, reported as memcpy-MB/s) and then Assemble (timed),
// so both see the same machine load. x-memcpy is Assemble's throughput
// over the copy's, summed over the iterations; x-memcpy-median is the
// median of the iterations' own ratios, which a burst of load on the shared
// host moves less. contiguous-crc verifies every
// chunk's CRC32C again (fresh views, the verification cache dropped), as
// the first Assemble after Open does. paged16 fills a paged layout of
// 16-token blocks instead, against the same contiguous copy. Run it as:
//
//	go test -run '^$' -bench BenchmarkAssemble -benchtime 5x -count 5 ./store/
func BenchmarkAssemble(b *testing.B) {
	const packets, tokens = 10, 1000
	spec := &format.ModelSpec{
		Architecture: "llama", Layers: 32, KVHeads: 8, HeadDim: 128, DType: format.DTypeBF16,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
			Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192},
		WeightsID: "meta-llama/Llama-3.1-8B",
	}
	db, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	p := floatPacket(spec, "bench", tokens, 0, 0, 1) // finite keys: no NaN or subnormal slow paths
	items := make([]AssembleItem, packets)
	for i := range items {
		p.TokenIDs[0] = uint32(i) // the same payload under 10 ids: 10 extents
		id, err := db.Put(context.Background(), p)
		if err != nil {
			b.Fatal(err)
		}
		items[i] = AssembleItem{ID: id, Offset: int64(i * tokens)}
	}
	p = nil
	a, err := db.PrepareAssemble(context.Background(), "bench", spec.Fingerprint(), items)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Release()
	dst := NewContiguousDest(spec, a.Tokens())
	n := int64(2 * len(dst.K) * len(dst.K[0]))
	paged := pagedBenchDest(spec, a.Tokens(), 16)
	for _, d := range []*Dest{dst, paged} { // warm: pages mapped and faulted, CRCs verified
		if err := a.Run(context.Background(), d, nil); err != nil {
			b.Fatal(err)
		}
	}
	procs := runtime.GOMAXPROCS(0)
	for _, bc := range []struct {
		name    string
		workers int
		dst     *Dest
		crc     bool // verify every chunk again: fresh views, verification cache dropped
	}{
		{"contiguous-workers-1", 1, dst, false},
		{"contiguous-workers-N", procs, dst, false},
		{"contiguous-crc-workers-N", procs, dst, true},
		{"paged16-workers-N", procs, paged, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(n)
			b.ReportAllocs()
			var memcpy time.Duration
			ratios := make([]float64, 0, b.N)
			for range b.N {
				b.StopTimer()
				start := time.Now()
				copyAssembly(b, a, dst, bc.workers)
				took := time.Since(start)
				memcpy += took
				run := a
				if bc.crc {
					run = freshAssembly(b, db, spec, items)
				}
				b.StartTimer()
				start = time.Now()
				if err := run.Run(context.Background(), bc.dst, &AssembleOptions{Workers: bc.workers}); err != nil {
					b.Fatal(err)
				}
				ratios = append(ratios, took.Seconds()/time.Since(start).Seconds())
				if bc.crc {
					run.Release()
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/memcpy.Seconds()/1e6, "memcpy-MB/s")
			b.ReportMetric(memcpy.Seconds()/b.Elapsed().Seconds(), "x-memcpy")
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "x-memcpy-median")
		})
	}
}

// freshAssembly drops every blob file's verification cache and prepares
// the assembly again with new views, so that its Run verifies every chunk.
func freshAssembly(b *testing.B, db *DB, spec *format.ModelSpec, items []AssembleItem) *Assembly {
	db.filesMu.RLock()
	for _, f := range db.files {
		f.ForgetVerified()
	}
	db.filesMu.RUnlock()
	a, err := db.PrepareAssemble(context.Background(), "bench", spec.Fingerprint(), items)
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// pagedBenchDest is a paged destination of exactly the blocks needed, the
// block table reversed so that neighbouring blocks are not neighbours.
func pagedBenchDest(spec *format.ModelSpec, tokens, bs int) *Dest {
	blocks := (tokens + bs - 1) / bs
	d := &Dest{Layout: LayoutPaged, BlockSize: bs, K: make([][]byte, spec.Layers), V: make([][]byte, spec.Layers)}
	for i := range blocks {
		d.BlockTable = append(d.BlockTable, int32(blocks-1-i))
	}
	n := blocks * bs * spec.KVHeads * spec.HeadDim * spec.DType.Size()
	for l := range spec.Layers {
		d.K[l], d.V[l] = make([]byte, n), make([]byte, n)
	}
	return d
}

// copyAssembly is the baseline: every chunk row block copied from the
// views' mappings to where Assemble puts it, without the shift, layers
// split over workers goroutines.
func copyAssembly(b *testing.B, a *Assembly, dst *Dest, workers int) {
	spec, packets, tokens := a.Spec(), a.Packets(), a.Tokens()
	layers, heads := len(dst.K), spec.KVHeads
	rb := spec.HeadDim * spec.DType.Size()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := w; l < layers; l += workers {
				for i, p := range packets {
					k, v, err := a.in.Source(i).(view.Source).Layer(l)
					if err != nil {
						b.Error(err)
						return
					}
					n := p.Tokens
					for h := range heads {
						off := (h*tokens + p.Row) * rb
						copy(dst.K[l][off:off+n*rb], k[h*n*rb:(h+1)*n*rb])
						copy(dst.V[l][off:off+n*rb], v[h*n*rb:(h+1)*n*rb])
					}
				}
			}
		}()
	}
	wg.Wait()
}
