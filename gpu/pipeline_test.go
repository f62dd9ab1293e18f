package gpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// pipelineCase is a decode-time zoom-in: one layer, every KV head, several
// spans of keys (rotated) and values, written through the whole pipeline
// (Source -> Prefetcher -> Reconstructor -> layout).
type pipelineCase struct {
	kind      LayoutKind
	factorDT  format.DType
	outDT     format.DType
	heads     int
	headDim   int
	spans     int
	spanRows  int
	rank      int
	budget    int // spans the device budget holds
	batchJobs int
}

// zoomScene is the data of a pipeline case: the source, the targets, and
// the expected K and V images.
type zoomScene struct {
	src        *memSource
	rope       *reconstruct.RoPE
	kLay, vLay Layout
	table      []int32
	targets    [2][]Target // K, V
	want       [2][]byte
}

func buildScene(t testing.TB, c pipelineCase, seed uint64) *zoomScene {
	rng := rand.New(rand.NewPCG(seed, 3))
	cfg := format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
		Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}
	sc := &zoomScene{src: newMemSource(), rope: mustRoPE(t, cfg, c.headDim)}
	tokens := c.spans*c.spanRows + 7
	sc.kLay, sc.table = testLayout(rng, c.kind, c.outDT, c.heads, c.headDim, tokens)
	sc.vLay = sc.kLay
	for kv, kind := range []format.ChunkKind{format.ChunkK, format.ChunkV} {
		sc.want[kv] = filled(sc.kLay.Bytes(), sentinel)
		for sp := range c.spans {
			spanPos := make([]int64, c.spanRows) // shared by the span's heads, as a server's would be
			for i := range spanPos {
				spanPos[i] = int64(2 + sp*c.spanRows + i + 4096) // beyond the layout's token index
			}
			for h := range c.heads {
				key := SpanKey{Layer: 3, Head: int32(h), Span: int32(sp), Kind: kind}
				key.Context[31] = 1
				f, enc := randFactors(t, rng, c.spanRows, c.headDim, c.rank, c.factorDT)
				sc.src.put(key, enc)
				tg := Target{Key: key, Score: float32(c.spans - sp), Head: h, Token: 2 + sp*c.spanRows, Rotate: kind == format.ChunkK}
				var rope *reconstruct.RoPE
				var pos []int64
				if tg.Rotate {
					rope, pos = sc.rope, spanPos
					tg.Positions = pos
				}
				if sp%2 == 1 {
					tg.Gates = make([]float32, c.rank)
					for i := range tg.Gates {
						tg.Gates[i] = float32(rng.Float64())
					}
				}
				rows := make([]byte, c.spanRows*c.headDim*c.outDT.Size())
				if err := reconstruct.ReconstructBytes(rows, c.outDT, f, tg.Gates, rope, pos); err != nil {
					t.Fatal(err)
				}
				placeRows(t, sc.want[kv], &sc.kLay, sc.table, h, tg.Token, rows)
				sc.targets[kv] = append(sc.targets[kv], tg)
			}
		}
	}
	return sc
}

// runPipeline zooms the scene's K and V targets on dev and returns the two
// destination images and the prefetcher's stats.
func runPipeline(t testing.TB, dev Device, c pipelineCase, sc *zoomScene) ([2][]byte, Stats) {
	blk := alignUp(reconstruct.FactorLayout{Rows: c.spanRows, Cols: c.headDim, Rank: c.rank, DType: c.factorDT}.Size(), ArenaAlign)
	pf, err := NewPrefetcher(dev, sc.src, PrefetchOptions{Budget: c.budget * blk, Staging: int64(4 * poolClass(blk)), Readers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := NewReconstructor(dev, sc.rope, s, ReconstructorOptions{BatchJobs: c.batchJobs})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	table := upload(t, dev, s, EncodeTable(sc.table))
	var got [2][]byte
	for kv := range 2 {
		out := Output{Layout: sc.kLay, Dst: upload(t, dev, s, filled(sc.kLay.Bytes(), sentinel)), Table: table}
		if err := r.Zoom(context.Background(), pf, out, sc.targets[kv]); err != nil {
			t.Fatal(err)
		}
		got[kv] = download(t, s, out.Dst)
	}
	return got, pf.Stats()
}

func pipelineCases() []pipelineCase {
	var cs []pipelineCase
	for _, k := range layoutKind {
		for i, od := range floatTypes {
			cs = append(cs, pipelineCase{kind: k, factorDT: floatTypes[(i+1)%3], outDT: od, heads: 2, headDim: 16,
				spans: 5, spanRows: 9, rank: 4, budget: 4, batchJobs: 3})
		}
	}
	return cs
}

// TestPipelineMatchesReference: fake source -> prefetch -> reconstruct ->
// both layouts, bit for bit against reconstruct.ReconstructBytes, with a
// budget smaller than the working set (evictions happen) and batches that
// cross span boundaries.
func TestPipelineMatchesReference(t *testing.T) {
	for i, c := range pipelineCases() {
		t.Run(fmt.Sprintf("%v/%v->%v", c.kind, c.factorDT, c.outDT), func(t *testing.T) {
			sc := buildScene(t, c, uint64(i))
			got, st := runPipeline(t, CPU(), c, sc)
			for kv, name := range []string{"K", "V"} {
				if !bytes.Equal(got[kv], sc.want[kv]) {
					t.Fatalf("%s: %s", name, firstDiff(&sc.kLay, got[kv], sc.want[kv]))
				}
			}
			n := int64(2 * c.spans * c.heads)
			if st.Hits+st.Misses != n || st.Loads < n || st.Evictions == 0 {
				t.Fatalf("stats %+v for %d spans over a budget of %d", st, n, c.budget)
			}
		})
	}
}

// TestPipelineOverlapsCopyAndCompute proves double buffering: the Source
// refuses to deliver span i+1 until the kernel of span i has completed. A
// pipeline that copied everything before computing would never finish.
func TestPipelineOverlapsCopyAndCompute(t *testing.T) {
	c := pipelineCase{kind: LayoutHND, factorDT: format.DTypeF32, outDT: format.DTypeBF16, heads: 1, headDim: 8,
		spans: 6, spanRows: 4, rank: 2, budget: 6, batchJobs: 1}
	sc := buildScene(t, c, 42)
	dev := CPU()
	pf, err := NewPrefetcher(dev, sc.src, PrefetchOptions{Budget: 6 * 512, Readers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	s, _ := dev.NewStream()
	defer s.Close()
	r, _ := NewReconstructor(dev, sc.rope, s, ReconstructorOptions{BatchJobs: 1})
	defer r.Close()
	var (
		mu       sync.Mutex
		launched []Event
		more     = make(chan struct{}, c.spans)
	)
	r.afterBatch = func() {
		ev, _ := dev.NewEvent()
		s.Record(ev)
		mu.Lock()
		launched = append(launched, ev)
		mu.Unlock()
		more <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sc.src.beforeRead = func(ctx context.Context, k SpanKey) error {
		if k.Span == 0 {
			return nil
		}
		for { // wait for the launch of span k.Span-1, then for its completion
			mu.Lock()
			n := len(launched)
			var ev Event
			if n >= int(k.Span) {
				ev = launched[k.Span-1]
			}
			mu.Unlock()
			if ev != nil {
				return ev.Synchronize()
			}
			select {
			case <-more:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	out := Output{Layout: sc.kLay, Dst: upload(t, dev, s, filled(sc.kLay.Bytes(), sentinel))}
	if err := r.Zoom(ctx, pf, out, sc.targets[0]); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("copies did not overlap kernels: span i+1 waited for kernel i forever")
		}
		t.Fatal(err)
	}
	if got := download(t, s, out.Dst); !bytes.Equal(got, sc.want[0]) {
		t.Fatalf("K: %s", firstDiff(&sc.kLay, got, sc.want[0]))
	}
}
