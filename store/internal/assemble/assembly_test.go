package assemble

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/crc32c"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/reconstruct"
)

var testSpec = format.ModelSpec{
	Layers: 3, KVHeads: 2, HeadDim: 8, DType: format.DTypeF32,
	RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000},
}

// memSource is a Source over one in-memory "file": raw chunks of random
// bytes, mapped (Raw returns them) or not (read with ReadAt), checked by
// the assembly unless verified. bad names a chunk whose header CRC is
// wrong.
type memSource struct {
	h       *format.PacketHeader
	file    []byte
	mapped  bool
	keep    *prune.Set
	mu      sync.Mutex
	checked map[int]bool
}

func newMemSource(t *testing.T, rows int, seed uint64, mapped bool) *memSource {
	t.Helper()
	m := &testSpec
	rb := m.HeadDim * m.DType.Size()
	n := m.KVHeads * rows * rb
	s := &memSource{mapped: mapped, checked: map[int]bool{}, h: &format.PacketHeader{
		Tokens: uint32(rows), Layers: uint32(m.Layers), KVHeads: uint32(m.KVHeads), HeadDim: uint32(m.HeadDim), DType: m.DType,
	}}
	s.h.ID[0] = byte(seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range 2 * m.Layers {
		b := make([]byte, n)
		for j := 0; j < n; j += 4 {
			u := math.Float32bits(float32(rng.NormFloat64()))
			b[j], b[j+1], b[j+2], b[j+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		}
		s.h.Chunks = append(s.h.Chunks, format.ChunkDesc{
			Layer: uint32(i / 2), Offset: uint64(len(s.file)), Length: uint64(n), RawLength: uint64(n),
			CRC32C: crc32c.Update(0, b),
		})
		s.file = append(s.file, b...)
	}
	return s
}

func (s *memSource) chunk(i int) []byte {
	c := &s.h.Chunks[i]
	return s.file[c.Offset : c.Offset+c.Length]
}

func (s *memSource) Header() *format.PacketHeader { return s.h }
func (s *memSource) Raw(i int) ([]byte, bool, error) {
	if !s.mapped {
		return nil, true, nil
	}
	return s.chunk(i), true, nil
}
func (s *memSource) ReadAt(b []byte, off uint64) error {
	if off+uint64(len(b)) > uint64(len(s.file)) {
		return fmt.Errorf("read past the end")
	}
	copy(b, s.file[off:])
	return nil
}
func (s *memSource) Checked(i int, crc uint32, mapped bool) error {
	if crc != s.h.Chunks[i].CRC32C {
		return fmt.Errorf("%w: chunk %d crc %08x, want %08x", ErrCorruption, i, crc, s.h.Chunks[i].CRC32C)
	}
	s.mu.Lock()
	s.checked[i] = true
	s.mu.Unlock()
	return nil
}
func (s *memSource) Counted(int) {}
func (s *memSource) Chunk(i int) ([]byte, error) {
	b := s.chunk(i)
	if crc32c.Update(0, b) != s.h.Chunks[i].CRC32C {
		return nil, fmt.Errorf("%w: chunk %d", ErrCorruption, i)
	}
	return b, nil
}
func (s *memSource) Decode(int, []byte, []byte) error {
	return errors.New("memSource: raw chunks only")
}
func (s *memSource) Keep() (*prune.Set, error)  { return s.keep, nil }
func (s *memSource) Guard(f func() error) error { return f() }

// want is what row (h, local row j) of item it's chunk i becomes: the
// stored row, keys rotated by the offset with reconstruct.Shift.
func want(t *testing.T, s *memSource, i, h, j int, offset int64) []byte {
	t.Helper()
	m := &testSpec
	rb := m.HeadDim * m.DType.Size()
	n := int(s.h.Rows())
	row := s.chunk(i)[(h*n+j)*rb : (h*n+j+1)*rb]
	if i%2 == 1 || offset == 0 {
		return row
	}
	r, err := reconstruct.NewRoPE(m.RoPE, m.HeadDim)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, rb)
	if err := reconstruct.Shift(out, row, m.DType, r, 1, 1, offset); err != nil {
		t.Fatal(err)
	}
	return out
}

// index is an independent computation of where element e of row (h, t)
// of a K (kind 0) or V (kind 1) buffer lies in a destination, per layout:
// the layouts' tensor shapes written out as nested arrays. A pooled
// layout's V buffer starts at V's first element in the pool.
func index(d *Dest, tokens, kind, h, t, e int) int {
	m := &testSpec
	H, hd, es := m.KVHeads, m.HeadDim, m.DType.Size()
	var b, bs, s int
	if d.BlockSize > 0 {
		b, bs, s = int(d.BlockTable[t/d.BlockSize]), d.BlockSize, t%d.BlockSize
	}
	switch d.Layout {
	case format.KVLayoutHND: // [H][T][hd]
		return ((h*tokens+t)*hd + e) * es
	case format.KVLayoutPagedNHD: // [blocks][bs][H][hd]
		return (((b*bs+s)*H+h)*hd + e) * es
	case format.KVLayoutTransposedV: // K [T][H][hd], V [H*hd][T]
		if kind == 0 {
			return ((t*H+h)*hd + e) * es
		}
		return ((h*hd+e)*tokens + t) * es
	case format.KVLayoutPagedKV: // [blocks][2][bs][H][hd]
		pool := func(b, kind, s, h, e int) int { return ((((b*2+kind)*bs+s)*H+h)*hd + e) * es }
		return pool(b, kind, s, h, e) - pool(0, kind, 0, 0, 0)
	case format.KVLayoutPagedPacked: // [blocks][H][bs][2*hd]
		pool := func(b, kind, s, h, e int) int { return (((b*H+h)*bs+s)*2*hd + kind*hd + e) * es }
		return pool(b, kind, s, h, e) - pool(0, kind, 0, 0, 0)
	}
	panic("index: layout")
}

// dests are the destinations each test fills: New's for every layout
// (block size 4 where paged), and the paged layouts again over a larger
// pool with a shuffled block table.
var dests = []struct {
	name string
	make func(t *testing.T, tokens int) *Dest
}{
	{"new/hnd", newDest(format.KVLayoutHND, 0)},
	{"new/transposed-v", newDest(format.KVLayoutTransposedV, 0)},
	{"new/paged-nhd", newDest(format.KVLayoutPagedNHD, 4)},
	{"new/paged-kv", newDest(format.KVLayoutPagedKV, 4)},
	{"new/paged-packed", newDest(format.KVLayoutPagedPacked, 4)},
	{"shuffled/paged-nhd", shuffled(format.KVLayoutPagedNHD)},
	{"shuffled/paged-kv", shuffled(format.KVLayoutPagedKV)},
	{"shuffled/paged-packed", shuffled(format.KVLayoutPagedPacked)},
}

func newDest(layout format.KVLayout, bs int) func(t *testing.T, tokens int) *Dest {
	return func(t *testing.T, tokens int) *Dest {
		d, err := New(&testSpec, tokens, Shape{Layout: layout, BlockSize: bs})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

// shuffled is a paged destination of 3-token blocks, two more blocks than
// needed, the table naming them last to first.
func shuffled(layout format.KVLayout) func(t *testing.T, tokens int) *Dest {
	return func(t *testing.T, tokens int) *Dest {
		m := &testSpec
		const bs = 3
		blocks := (tokens+bs-1)/bs + 2
		var table []int32
		for b := range (tokens + bs - 1) / bs {
			table = append(table, int32(blocks-1-b))
		}
		n := blocks * bs * m.KVHeads * m.HeadDim * m.DType.Size()
		if layout == format.KVLayoutPagedNHD {
			d := alloc(layout, m.Layers, n)
			d.BlockSize, d.BlockTable = bs, table
			return d
		}
		pools := make([][]byte, m.Layers)
		for l := range pools {
			pools[l] = make([]byte, 2*n)
		}
		d, err := NewPooled(m, layout, pools, bs, table)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

func TestRunPlacesRows(t *testing.T) {
	m := &testSpec
	es := m.DType.Size()
	rb := m.HeadDim * es
	// Without OnLayer the calling goroutine fills too (alone with one
	// worker); with it, it only reports.
	runs := []struct {
		name string
		o    *Options
	}{
		{"inline-1", &Options{Workers: 1}},
		{"inline-2", &Options{Workers: 2}},
		{"onlayer-2", &Options{Workers: 2, OnLayer: func(int) error { return nil }}},
	}
	for _, mapped := range []bool{true, false} {
		for _, dc := range dests {
			for _, rc := range runs {
				t.Run(fmt.Sprintf("%s/mapped=%v/%s", dc.name, mapped, rc.name), func(t *testing.T) {
					srcs := []*memSource{newMemSource(t, 5, 1, mapped), newMemSource(t, 7, 2, mapped)}
					offsets := []int64{0, 40}
					items := []Item{{Src: srcs[0], Offset: offsets[0]}, {Src: srcs[1], Offset: offsets[1]}}
					a, err := Prepare(m, items)
					if err != nil {
						t.Fatal(err)
					}
					T := a.Tokens()
					if T != 12 {
						t.Fatalf("Tokens %d, want 12", T)
					}
					d := dc.make(t, T)
					if err := a.Run(context.Background(), d, rc.o); err != nil {
						t.Fatal(err)
					}
					for l := range m.Layers {
						for kind, bufs := range [][][]byte{d.K, d.V} {
							row := 0
							for p, s := range srcs {
								for j := range int(s.h.Rows()) {
									for h := range m.KVHeads {
										w := want(t, s, 2*l+kind, h, j, offsets[p])
										got := make([]byte, rb)
										for e := range m.HeadDim {
											o := index(d, T, kind, h, row+j, e)
											copy(got[e*es:(e+1)*es], bufs[l][o:o+es])
										}
										if string(got) != string(w) {
											t.Fatalf("layer %d kind %d packet %d row %d head %d differs", l, kind, p, j, h)
										}
									}
								}
								row += int(s.h.Rows())
							}
						}
					}
					for _, s := range srcs {
						if len(s.checked) != 2*m.Layers {
							t.Errorf("packet %d: %d of %d chunks checked as placed", s.h.ID[0], len(s.checked), 2*m.Layers)
						}
					}
				})
			}
		}
	}
}

// TestRunPlacesRowsKernelShapes is TestRunPlacesRows with shapes whose
// rows the SIMD kernels place (testSpec's 32-byte f32 rows of 8 dims are
// copied by rowcopy's kernel but rotated by the portable code): rows of
// 64 dims, 128 or 256 bytes, rotate-half and interleaved, every layout.
// The stored bytes are random, so bf16 and f16 rows hold NaNs and
// infinities, which the kernels' slow paths take. Each shape runs with
// paged rows stored through the cache and streamed (streamMin 0: the
// non-temporal kernels where the destination's alignment allows them).
func TestRunPlacesRowsKernelShapes(t *testing.T) {
	saved, savedMin := testSpec, streamMin
	defer func() { testSpec, streamMin = saved, savedMin }()
	for _, dt := range []format.DType{format.DTypeBF16, format.DTypeF16, format.DTypeF32} {
		for _, style := range []format.RoPEStyle{format.RoPERotateHalf, format.RoPEInterleaved} {
			for _, stream := range []bool{false, true} {
				testSpec = format.ModelSpec{Layers: 2, KVHeads: 3, HeadDim: 64, DType: dt,
					RoPE: format.RoPE{Style: style, Theta: 500000}}
				streamMin = savedMin
				if stream {
					streamMin = 0
				}
				t.Run(fmt.Sprintf("%v/%v/stream=%v", dt, style, stream), TestRunPlacesRows)
			}
		}
	}
}

func TestRunCorruptChunk(t *testing.T) {
	for _, mapped := range []bool{true, false} {
		for _, workers := range []int{1, 2} {
			s := newMemSource(t, 6, 3, mapped)
			s.h.Chunks[3].CRC32C ^= 1
			a, err := Prepare(&testSpec, []Item{{Src: s, Offset: 3}})
			if err != nil {
				t.Fatal(err)
			}
			reported := -1
			err = a.Run(context.Background(), alloc(format.KVLayoutHND, testSpec.Layers, testSpec.KVHeads*a.Tokens()*testSpec.HeadDim*4), &Options{Workers: workers, OnLayer: func(l int) error { reported = l; return nil }})
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("mapped=%v workers=%d: Run = %v, want ErrCorruption", mapped, workers, err)
			}
			if reported >= 1 {
				t.Errorf("mapped=%v workers=%d: layer %d reported though layer 1's V is corrupt", mapped, workers, reported)
			}
			// Without OnLayer the calling goroutine fills: the same refusal.
			for _, layout := range []format.KVLayout{format.KVLayoutHND, format.KVLayoutTransposedV} {
				var d *Dest
				if layout == format.KVLayoutHND {
					d = alloc(layout, testSpec.Layers, testSpec.KVHeads*a.Tokens()*testSpec.HeadDim*4)
				} else {
					d = newDest(layout, 0)(t, a.Tokens())
				}
				if err := a.Run(context.Background(), d, &Options{Workers: workers}); !errors.Is(err, ErrCorruption) {
					t.Fatalf("mapped=%v workers=%d %v, no OnLayer: Run = %v, want ErrCorruption", mapped, workers, layout, err)
				}
			}
		}
	}
}

// TestRunCanceled checks that a done context stops a run with and
// without OnLayer (the calling goroutine filling).
func TestRunCanceled(t *testing.T) {
	s := newMemSource(t, 6, 3, true)
	a, err := Prepare(&testSpec, []Item{{Src: s}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, o := range []*Options{{Workers: 1}, {Workers: 2}, {Workers: 1, OnLayer: func(int) error { return nil }}} {
		d := alloc(format.KVLayoutHND, testSpec.Layers, testSpec.KVHeads*a.Tokens()*testSpec.HeadDim*4)
		if err := a.Run(ctx, d, o); !errors.Is(err, context.Canceled) {
			t.Errorf("workers %d, OnLayer %v: Run = %v, want context.Canceled", o.Workers, o.OnLayer != nil, err)
		}
	}
}

func TestCheckRejects(t *testing.T) {
	s := newMemSource(t, 4, 4, true)
	a, err := Prepare(&testSpec, []Item{{Src: s}})
	if err != nil {
		t.Fatal(err)
	}
	good := func(t *testing.T) *Dest { return shuffled(format.KVLayoutPagedNHD)(t, 4) }
	cases := []struct {
		name  string
		spoil func(d *Dest)
	}{
		{"nil-like layers", func(d *Dest) { d.K = d.K[:1] }},
		{"short buffer", func(d *Dest) { d.V[1] = d.V[1][:len(d.V[1])-1] }},
		{"block size", func(d *Dest) { d.BlockSize = 0 }},
		{"short table", func(d *Dest) { d.BlockTable = nil }},
		{"block range", func(d *Dest) { d.BlockTable[0] = 99 }},
		{"overlap", func(d *Dest) { d.V[0] = d.K[0] }},
		{"layout", func(d *Dest) { d.Layout = 99 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := good(t)
			tc.spoil(d)
			if err := a.Run(context.Background(), d, nil); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s: Run = %v, want ErrInvalidArgument", tc.name, err)
			}
		})
	}
	if err := a.Run(context.Background(), good(t), nil); err != nil {
		t.Fatalf("good destination: %v", err)
	}
}

func TestCheckPositions(t *testing.T) {
	keep := &prune.Set{Layers: 1, KVHeads: 2, Tokens: 10, Keep: [][]int32{{3, 5}, {4, 9}}}
	for _, c := range []struct {
		offset int64
		keep   *prune.Set
		ok     bool
	}{
		{0, nil, true}, {5, nil, true}, {-1, nil, false},
		{-3, keep, true}, {-4, keep, false}, {2, keep, true},
	} {
		err := checkPositions(c.offset, c.keep)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidArgument)) {
			t.Errorf("offset %d, keep %v: %v", c.offset, c.keep != nil, err)
		}
	}
}

func TestCheckPooledRejects(t *testing.T) {
	s := newMemSource(t, 4, 5, true)
	a, err := Prepare(&testSpec, []Item{{Src: s}})
	if err != nil {
		t.Fatal(err)
	}
	for _, layout := range []format.KVLayout{format.KVLayoutPagedKV, format.KVLayoutPagedPacked} {
		good := func(t *testing.T) *Dest { return shuffled(layout)(t, 4) }
		cases := []struct {
			name  string
			spoil func(d *Dest)
		}{
			{"V elsewhere", func(d *Dest) { d.V[0] = make([]byte, len(d.V[0])) }},
			{"V not after K", func(d *Dest) { d.V[1] = d.K[1] }},
			{"short pool", func(d *Dest) { d.K[0], d.V[0] = d.K[0][:len(d.K[0])-1], d.V[0][:len(d.V[0])-1] }},
			{"shared pool", func(d *Dest) { d.K[1], d.V[1] = d.K[0], d.V[0] }},
			{"block size", func(d *Dest) { d.BlockSize = 0 }},
			{"block range", func(d *Dest) { d.BlockTable[0] = 99 }},
			{"twice", func(d *Dest) { d.BlockTable[1] = d.BlockTable[0] }},
		}
		for _, tc := range cases {
			t.Run(layout.String()+"/"+tc.name, func(t *testing.T) {
				d := good(t)
				tc.spoil(d)
				if err := a.Run(context.Background(), d, nil); !errors.Is(err, ErrInvalidArgument) {
					t.Errorf("%v %s: Run = %v, want ErrInvalidArgument", layout, tc.name, err)
				}
			})
		}
		if err := a.Run(context.Background(), good(t), nil); err != nil {
			t.Fatalf("%v: good destination: %v", layout, err)
		}
	}
}

func TestNewRejects(t *testing.T) {
	for _, s := range []Shape{
		{Layout: format.KVLayoutHND, BlockSize: 4},
		{Layout: format.KVLayoutPagedNHD},
		{Layout: format.KVLayoutPagedKV, BlockSize: -1},
		{Layout: 99},
	} {
		if _, err := New(&testSpec, 5, s); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v, want ErrInvalidArgument", s, err)
		}
	}
	if _, err := NewPooled(&testSpec, format.KVLayoutPagedNHD, nil, 4, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("NewPooled of an unpooled layout: %v", err)
	}
}
