package quality

import (
	"math"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/segment"
)

// TestSpanStoreRowDType: a span memory built for a bf16 spec
// (Config.RowDType) reads back its resident rows as the prefill's rounded
// to bf16, and an f32 one as they were; the bf16 memory is the smaller.
func TestSpanStoreRowDType(t *testing.T) {
	m := tinyRandom(t)
	n := 160
	ctx := make([]int, n)
	for i := range ctx {
		ctx[i] = (i*37 + i*i) % m.Vocab
	}
	res, err := m.Forward(ctx, 0, nil, llama.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := surprisal(res, n)
	hd := m.HeadDim()
	sizes := map[format.DType]int64{}
	for _, tc := range []struct {
		dt  format.DType
		tol float64 // relative, of a row value
	}{{format.DTypeF32, 1e-6}, {format.DTypeBF16, 1.0 / 256}} {
		cfg := Config{Model: m, Context: 2 * sinks, Continuation: 1, Name: "rowdtype", RowDType: tc.dt,
			Segment: segment.Options{MinSpan: 16, MaxSpan: 40}}
		cfg.ensureDefaults()
		s, err := newSpanStore(m, res.Cache, h, &cfg)
		if err != nil {
			t.Fatalf("%v: %v", tc.dt, err)
		}
		if got := s.meta.ResidentDType; got != tc.dt {
			t.Errorf("%v: memory's resident dtype %v", tc.dt, got)
		}
		nr := len(s.meta.Resident)
		if nr == 0 {
			t.Fatalf("%v: no resident row", tc.dt)
		}
		rounded := 0
		for l, kv := range res.Cache.Layers {
			for g := range m.KVHeads {
				for i, tok := range s.meta.Resident {
					for j := range hd {
						for _, p := range []struct {
							got, want float32
						}{{s.resK[l][(g*nr+i)*hd+j], kv.K[(g*n+tok)*hd+j]}, {s.resV[l][(g*nr+i)*hd+j], kv.V[(g*n+tok)*hd+j]}} {
							d := math.Abs(float64(p.got - p.want))
							if d > tc.tol*math.Abs(float64(p.want))+1e-6 {
								t.Fatalf("%v: layer %d head %d token %d [%d]: %v, prefill %v", tc.dt, l, g, tok, j, p.got, p.want)
							}
							if d > 0 {
								rounded++
							}
							if tc.dt == format.DTypeBF16 && format.BF16ToF32(format.F32ToBF16(p.got)) != p.got {
								t.Fatalf("%v: token %d [%d]: %v is not a bf16", tc.dt, tok, j, p.got)
							}
						}
					}
				}
			}
		}
		if tc.dt == format.DTypeBF16 && rounded == 0 {
			t.Errorf("bf16: no resident value rounded")
		}
		sizes[tc.dt] = s.size.Stored()
		s.close()
	}
	if !(sizes[format.DTypeBF16] < sizes[format.DTypeF32]) {
		t.Errorf("stored bytes: bf16 %d, f32 %d", sizes[format.DTypeBF16], sizes[format.DTypeF32])
	}
}
