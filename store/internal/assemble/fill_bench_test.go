package assemble

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/cputest"
	"github.com/kvstore/kvstore/prune"
)

var benchSpec = format.ModelSpec{
	Layers: 32, KVHeads: 8, HeadDim: 128, DType: format.DTypeBF16,
	RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
		Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192},
}

// benchSource is a mapped, verified packet of benchSpec's shape: bf16 keys
// and values uniform in [-4, 4), as the store's BenchmarkAssemble stores
// them. (Random bit patterns were used before: their small exponents make
// subnormal float32 products, which cost the rotation kernels several
// times their usual time per vector and made the benchmark measure that.)
type benchSource struct {
	h    *format.PacketHeader
	file []byte
}

func newBenchSource(tokens int, seed uint64) *benchSource {
	m := &benchSpec
	n := m.KVHeads * tokens * m.HeadDim * m.DType.Size()
	s := &benchSource{h: &format.PacketHeader{
		Tokens: uint32(tokens), Layers: uint32(m.Layers), KVHeads: uint32(m.KVHeads), HeadDim: uint32(m.HeadDim), DType: m.DType,
	}, file: make([]byte, 2*m.Layers*n)}
	s.h.ID[0] = byte(seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	f := make([]float32, len(s.file)/2)
	for j := range f {
		f[j] = float32(rng.Float64()*8 - 4)
	}
	if err := format.FromF32(s.file, f, m.DType); err != nil {
		panic(err) // a bf16 spec: cannot fail
	}
	for i := range 2 * m.Layers {
		s.h.Chunks = append(s.h.Chunks, format.ChunkDesc{
			Layer: uint32(i / 2), Offset: uint64(i * n), Length: uint64(n), RawLength: uint64(n),
		})
	}
	return s
}

func (s *benchSource) chunk(i int) []byte {
	c := &s.h.Chunks[i]
	return s.file[c.Offset : c.Offset+c.Length]
}
func (s *benchSource) Header() *format.PacketHeader      { return s.h }
func (s *benchSource) Raw(i int) ([]byte, bool, error)   { return s.chunk(i), false, nil }
func (s *benchSource) ReadAt(b []byte, off uint64) error { copy(b, s.file[off:]); return nil }
func (s *benchSource) Checked(int, uint32, bool) error   { return nil }
func (s *benchSource) Counted(int)                       {}
func (s *benchSource) Chunk(i int) ([]byte, error)       { return s.chunk(i), nil }
func (s *benchSource) Decode(int, []byte, []byte) error  { return fmt.Errorf("raw chunks only") }
func (s *benchSource) Keep() (*prune.Set, error)         { return nil, nil }
func (s *benchSource) Guard(f func() error) error        { return f() }

// BenchmarkFillPaged is the store's BenchmarkAssemble paged16 case without
// the store: packets of benchSpec's shape in memory, assembled into 16-token
// blocks (the block table reversed), each iteration paired with a plain
// copy of the same bytes into a contiguous destination with as many
// goroutines (untimed, memcpy-MB/s); x-memcpy is the ratio of wall times,
// cpu-x-memcpy that of the process's CPU time in each, which moves less
// when other processes share the cores. The destination (393 MB) is past
// streamMin, so rows are stored with non-temporal hints; cached-workers-N
// stores them through the cache instead, for the comparison. Run it as:
//
//	go test -run '^$' -bench FillPaged -benchtime 5x -count 3 ./store/internal/assemble
func BenchmarkFillPaged(b *testing.B) {
	const packets, tokens, bs = 3, 1000, 16
	m := &benchSpec
	items := make([]Item, packets)
	srcs := make([]*benchSource, packets)
	for i := range items {
		srcs[i] = newBenchSource(tokens, uint64(i))
		items[i] = Item{Src: srcs[i], Offset: int64(i * tokens)}
	}
	a, err := Prepare(m, items)
	if err != nil {
		b.Fatal(err)
	}
	T := a.Tokens()
	blocks := (T + bs - 1) / bs
	var table []int32
	for i := range blocks {
		table = append(table, int32(blocks-1-i))
	}
	rb := m.HeadDim * m.DType.Size()
	paged := alloc(format.KVLayoutPagedNHD, m.Layers, blocks*bs*m.KVHeads*rb)
	paged.BlockSize, paged.BlockTable = bs, table
	contig := alloc(format.KVLayoutHND, m.Layers, T*m.KVHeads*rb)
	if err := a.Run(context.Background(), paged, nil); err != nil { // fault the pages in
		b.Fatal(err)
	}
	copyAll(srcs, contig, tokens, 2)
	n := int64(2 * m.Layers * T * m.KVHeads * rb)
	saved := streamMin
	defer func() { streamMin = saved }()
	for _, c := range []struct {
		name    string
		workers int
		min     int
	}{
		{"workers-1", 1, saved},
		{fmt.Sprintf("workers-%d", runtime.GOMAXPROCS(0)), runtime.GOMAXPROCS(0), saved},
		{fmt.Sprintf("cached-workers-%d", runtime.GOMAXPROCS(0)), runtime.GOMAXPROCS(0), math.MaxInt},
	} {
		workers := c.workers
		streamMin = c.min
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(n)
			b.ReportAllocs()
			var memcpy, cpuCopy, cpuRun time.Duration
			for range b.N {
				b.StopTimer()
				start, c0 := time.Now(), cputest.Used()
				copyAll(srcs, contig, tokens, workers)
				memcpy += time.Since(start)
				c1 := cputest.Used()
				cpuCopy += c1 - c0
				b.StartTimer()
				if err := a.Run(context.Background(), paged, &Options{Workers: workers}); err != nil {
					b.Fatal(err)
				}
				cpuRun += cputest.Used() - c1
			}
			b.ReportMetric(float64(n)*float64(b.N)/memcpy.Seconds()/1e6, "memcpy-MB/s")
			b.ReportMetric(memcpy.Seconds()/b.Elapsed().Seconds(), "x-memcpy")
			if cpuRun > 0 {
				b.ReportMetric(cpuCopy.Seconds()/cpuRun.Seconds(), "cpu-x-memcpy")
			}
		})
	}
}

// copyAll is the baseline: each head's rows of every chunk copied to
// where a contiguous destination holds them, layers split over workers.
func copyAll(srcs []*benchSource, d *Dest, tokens, workers int) {
	m := &benchSpec
	rb := m.HeadDim * m.DType.Size()
	T := len(srcs) * tokens
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for l := w; l < m.Layers; l += workers {
				for i, s := range srcs {
					k, v := s.chunk(2*l), s.chunk(2*l+1)
					for h := range m.KVHeads {
						off := (h*T + i*tokens) * rb
						copy(d.K[l][off:off+tokens*rb], k[h*tokens*rb:(h+1)*tokens*rb])
						copy(d.V[l][off:off+tokens*rb], v[h*tokens*rb:(h+1)*tokens*rb])
					}
				}
			}
		})
	}
	wg.Wait()
}
