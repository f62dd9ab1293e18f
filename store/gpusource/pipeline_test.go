package gpusource_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/gpu"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store"
	"github.com/kvstore/kvstore/store/gpusource"
)

// pipeSentinel fills the destination where no span is written.
const pipeSentinel = byte(0xA5)

// pipeLayer is the layer the pipeline test zooms into.
const pipeLayer = 1

// destLayout is layer pipeLayer's K or V buffer for the whole context:
// contiguous HND, or paged NHD over a shuffled block table with spare
// blocks.
func destLayout(rng *rand.Rand, kind gpu.LayoutKind, dt format.DType, m *store.SpanMeta) (gpu.Layout, []int32) {
	lay := gpu.Layout{Kind: kind, DType: dt, Heads: m.KVHeads, HeadDim: m.HeadDim, Tokens: m.Tokens}
	if kind == gpu.LayoutHND {
		return lay, nil
	}
	const bs = 8
	lay.BlockSize = bs
	lay.Tokens = (m.Tokens + bs - 1) / bs * bs
	lay.Blocks = lay.Tokens/bs + 3
	perm := rng.Perm(lay.Blocks)
	table := make([]int32, lay.Tokens/bs)
	for i := range table {
		table[i] = int32(perm[i])
	}
	return lay, table
}

// pipeTargets builds the targets of one kind (every KV head, every
// factored span of pipeLayer) and the expected image: a sentinel-filled
// buffer with each span's CPU reference rows placed, reconstructed from
// the factors read back from the store (keys rotated at base+Start+i, as
// SpanReader.ReconstructSpan does).
func pipeTargets(t *testing.T, r *store.SpanReader, lay *gpu.Layout, table []int32, kind format.ChunkKind) ([]gpu.Target, []byte) {
	t.Helper()
	m := r.Meta()
	want := bytes.Repeat([]byte{pipeSentinel}, lay.Bytes())
	var targets []gpu.Target
	for sp, info := range m.Spans {
		if !info.Factored {
			continue
		}
		pos := make([]int64, info.Len())
		for i := range pos {
			pos[i] = m.BasePosition + int64(info.Start+i)
		}
		for h := range m.KVHeads {
			tg := gpu.Target{
				Key:   gpu.SpanKey{Context: r.ID(), Layer: pipeLayer, Head: int32(h), Span: int32(sp), Kind: kind},
				Score: float32(len(m.Spans) - sp), Head: h, Token: info.Start, Rotate: kind == format.ChunkK,
			}
			f, err := r.Factors(pipeLayer, h, sp, kind)
			if err != nil {
				t.Fatal(err)
			}
			var rope *reconstruct.RoPE
			var p []int64
			if tg.Rotate {
				tg.Positions, rope, p = pos, r.RoPE(), pos
			}
			rows := make([]byte, info.Len()*m.HeadDim*lay.DType.Size())
			if err := reconstruct.ReconstructBytes(rows, lay.DType, f, nil, rope, p); err != nil {
				t.Fatal(err)
			}
			placeRows(t, want, lay, table, h, info.Start, rows)
			targets = append(targets, tg)
		}
	}
	return targets, want
}

// placeRows writes rows (HeadDim elements of lay.DType each) at (head,
// token, token+1, ...) of an image of lay.
func placeRows(t *testing.T, img []byte, lay *gpu.Layout, table []int32, head, token int, rows []byte) {
	t.Helper()
	rb := lay.HeadDim * lay.DType.Size()
	for i := 0; i*rb < len(rows); i++ {
		at, err := lay.Row(head, token+i, table)
		if err != nil {
			t.Fatal(err)
		}
		copy(img[at*lay.DType.Size():], rows[i*rb:(i+1)*rb])
	}
}

// upload copies b into a new device buffer (synchronously).
func upload(t *testing.T, dev gpu.Device, s gpu.Stream, b []byte) gpu.Buffer {
	t.Helper()
	if len(b) == 0 {
		return gpu.Buffer{}
	}
	buf, err := dev.Alloc(len(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CopyHtoD(buf, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	return buf
}

// download copies a device buffer back (synchronously).
func download(t *testing.T, s gpu.Stream, b gpu.Buffer) []byte {
	t.Helper()
	out := make([]byte, b.Len())
	if err := s.CopyDtoH(out, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	return out
}

// firstDiff describes the first differing element of two images.
func firstDiff(lay *gpu.Layout, got, want []byte) string {
	es := lay.DType.Size()
	for i := 0; i < len(got); i += es {
		if !bytes.Equal(got[i:i+es], want[i:i+es]) {
			return fmt.Sprintf("element %d (row %d, dim %d): got % x, want % x", i/es, i/es/lay.HeadDim, i/es%lay.HeadDim, got[i:i+es], want[i:i+es])
		}
	}
	return "no difference"
}

// pipeBudget is a device budget of n of the largest factor blocks of
// pipeLayer, each rounded up to gpu.ArenaAlign.
func pipeBudget(t *testing.T, r *store.SpanReader, n int) int {
	t.Helper()
	largest := 0
	for sp, info := range r.Meta().Spans {
		if !info.Factored {
			continue
		}
		for h := range r.Meta().KVHeads {
			for _, kind := range []format.ChunkKind{format.ChunkK, format.ChunkV} {
				size, err := r.FactorSize(pipeLayer, h, sp, kind)
				if err != nil {
					t.Fatal(err)
				}
				largest = max(largest, (size+gpu.ArenaAlign-1)/gpu.ArenaAlign*gpu.ArenaAlign)
			}
		}
	}
	return n * largest
}

// TestPipelineFromStore: store span memory -> gpu prefetcher (over
// gpusource.New) -> Reconstructor.Zoom -> both destination layouts, bit
// for bit against reconstruct.ReconstructBytes of the factors read back
// from the store, with a budget of four blocks (a batch of two plus two
// loads in flight) so that spans are evicted and reloaded.
func TestPipelineFromStore(t *testing.T) {
	r, _ := fixture(t)
	budget := pipeBudget(t, r, 4)
	for i, kind := range []gpu.LayoutKind{gpu.LayoutHND, gpu.LayoutPagedNHD} {
		for j, outDT := range []format.DType{format.DTypeBF16, format.DTypeF32} {
			t.Run(fmt.Sprintf("%v/%v", kind, outDT), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(j)))
				lay, table := destLayout(rng, kind, outDT, r.Meta())
				dev := gpu.CPU()
				pf, err := gpu.NewPrefetcher(dev, gpusource.New(r), gpu.PrefetchOptions{Budget: budget, Staging: 1 << 20, Readers: 2})
				if err != nil {
					t.Fatal(err)
				}
				defer pf.Close()
				s, err := dev.NewStream()
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				rc, err := gpu.NewReconstructor(dev, r.RoPE(), s, gpu.ReconstructorOptions{BatchJobs: 2})
				if err != nil {
					t.Fatal(err)
				}
				defer rc.Close()
				tbl := upload(t, dev, s, gpu.EncodeTable(table))
				n := 0
				for _, ck := range []format.ChunkKind{format.ChunkK, format.ChunkV} {
					targets, want := pipeTargets(t, r, &lay, table, ck)
					n += len(targets)
					out := gpu.Output{Layout: lay, Dst: upload(t, dev, s, bytes.Repeat([]byte{pipeSentinel}, lay.Bytes())), Table: tbl}
					if err := rc.Zoom(context.Background(), pf, out, targets); err != nil {
						t.Fatal(err)
					}
					if got := download(t, s, out.Dst); !bytes.Equal(got, want) {
						t.Fatalf("%v: %s", ck, firstDiff(&lay, got, want))
					}
				}
				st := pf.Stats()
				if n < 4 || st.Loads < int64(n) || st.BytesMoved <= 0 || st.Evictions == 0 {
					t.Fatalf("stats %+v for %d targets over a budget of %d bytes", st, n, budget)
				}
			})
		}
	}
}
