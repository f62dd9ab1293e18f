package gpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// memSource is an in-memory Source: what the store will implement.
type memSource struct {
	mu     sync.Mutex
	blocks map[SpanKey][]byte
	reads  []SpanKey
	// beforeRead, when set, runs at the start of every ReadSpan.
	beforeRead func(ctx context.Context, key SpanKey) error
}

func newMemSource() *memSource { return &memSource{blocks: map[SpanKey][]byte{}} }

func (m *memSource) put(k SpanKey, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.blocks[k] = b
}

func (m *memSource) SpanSize(k SpanKey) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blocks[k]
	if !ok {
		return 0, fmt.Errorf("memSource: %v not found", k)
	}
	return len(b), nil
}

func (m *memSource) ReadSpan(ctx context.Context, k SpanKey, dst []byte) error {
	if m.beforeRead != nil {
		if err := m.beforeRead(ctx, k); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blocks[k]
	if !ok || len(dst) != len(b) {
		return fmt.Errorf("memSource: %v: %d bytes asked, %d held", k, len(dst), len(b))
	}
	copy(dst, b)
	m.reads = append(m.reads, k)
	return nil
}

func (m *memSource) readOrder() []SpanKey {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reads)
}

// randFactors makes factors of the given shape whose elements are exactly
// representable in dt (encoded and decoded once), with decreasing singular
// values as an SVD has.
func randFactors(t testing.TB, rng *rand.Rand, rows, cols, rank int, dt format.DType) (*reconstruct.Factors, []byte) {
	t.Helper()
	f := &reconstruct.Factors{Rows: rows, Cols: cols, Rank: rank,
		U: make([]float32, rows*rank), S: make([]float32, rank), Vt: make([]float32, rank*cols)}
	for i := range f.U {
		f.U[i] = float32(rng.NormFloat64() / math.Sqrt(float64(rows)))
	}
	for i := range f.S {
		f.S[i] = float32(10 / float64(i+1) * (1 + rng.Float64()))
	}
	for i := range f.Vt {
		f.Vt[i] = float32(rng.NormFloat64() / math.Sqrt(float64(cols)))
	}
	enc, err := reconstruct.AppendFactors(nil, f, dt)
	if err != nil {
		t.Fatal(err)
	}
	g, _, err := reconstruct.DecodeFactors(enc)
	if err != nil {
		t.Fatal(err)
	}
	return g, enc
}

// ropeConfigs are RoPE variants exercised by the kernel tests.
func ropeConfigs(headDim int) map[string]format.RoPE {
	return map[string]format.RoPE{
		"rotate-half-llama3": {Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
			Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192},
		"interleaved": {Style: format.RoPEInterleaved, Theta: 10000},
		"partial-yarn": {Style: format.RoPERotateHalf, RotaryDims: headDim / 2, Theta: 10000,
			Scaling: format.RoPEScalingYaRN, Factor: 4, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1},
	}
}

func mustRoPE(t testing.TB, cfg format.RoPE, headDim int) *reconstruct.RoPE {
	t.Helper()
	r, err := reconstruct.NewRoPE(cfg, headDim)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// testLayout makes a layout of the given kind; the paged kind gets a
// shuffled block table over more physical blocks than it maps.
func testLayout(rng *rand.Rand, kind LayoutKind, dt format.DType, heads, headDim, tokens int) (Layout, []int32) {
	lay := Layout{Kind: kind, DType: dt, Heads: heads, HeadDim: headDim, Tokens: tokens}
	if kind == LayoutHND {
		return lay, nil
	}
	lay.BlockSize = 4
	lay.Tokens = (tokens + 3) / 4 * 4
	lay.Blocks = lay.Tokens/4 + 3
	table := make([]int32, lay.Tokens/4)
	perm := rng.Perm(lay.Blocks)
	for i := range table {
		table[i] = int32(perm[i])
	}
	return lay, table
}

// upload copies b into a new device buffer (synchronously).
func upload(t testing.TB, dev Device, s Stream, b []byte) Buffer {
	t.Helper()
	if len(b) == 0 {
		return Buffer{}
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
func download(t testing.TB, s Stream, b Buffer) []byte {
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

// placeRows writes rows (rows x HeadDim elements of lay.DType, as bytes)
// at (head, token...) of an expected layout image.
func placeRows(t testing.TB, img []byte, lay *Layout, table []int32, head, token int, rows []byte) {
	t.Helper()
	rb := lay.HeadDim * lay.DType.Size()
	for r := 0; r*rb < len(rows); r++ {
		at, err := lay.Row(head, token+r, table)
		if err != nil {
			t.Fatal(err)
		}
		copy(img[at*lay.DType.Size():], rows[r*rb:(r+1)*rb])
	}
}

// firstDiff describes the first differing element of two layout images.
func firstDiff(lay *Layout, got, want []byte) string {
	es := lay.DType.Size()
	for i := 0; i < len(got); i += es {
		if !slices.Equal(got[i:i+es], want[i:i+es]) {
			return fmt.Sprintf("element %d (row %d, dim %d): got % x, want % x", i/es, i/es/lay.HeadDim, i/es%lay.HeadDim, got[i:i+es], want[i:i+es])
		}
	}
	return "no difference"
}

var sentinel = byte(0xA5)

func filled(n int, v byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = v
	}
	return b
}
