package gpu

import (
	"errors"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

func encodeFixture(t *testing.T) (*Reconstructor, Layout, []*Span) {
	rope := mustRoPE(t, format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}, 8)
	lay := Layout{Kind: LayoutHND, DType: format.DTypeBF16, Heads: 2, HeadDim: 8, Tokens: 32}
	var spans []*Span
	for range 4 {
		spans = append(spans, &Span{Layout: reconstruct.FactorLayout{Rows: 4, Cols: 8, Rank: 2, DType: format.DTypeF32}})
	}
	return &Reconstructor{rope: rope}, lay, spans
}

// TestEncodeSharesTables: heads of one span share its rotation table.
func TestEncodeSharesTables(t *testing.T) {
	r, lay, spans := encodeFixture(t)
	pos := []int64{100, 101, 102, 103}
	targets := []Target{
		{Head: 0, Token: 0, Rotate: true, Positions: pos},
		{Head: 1, Token: 0, Rotate: true, Positions: pos},
		{Head: 0, Token: 8, Rotate: true},
		{Head: 1, Token: 8, Rotate: true, Gates: []float32{1, 0.5}},
	}
	aux, n, maxRows, maxRank, err := r.encode(lay, targets, spans)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 || maxRows != 4 || maxRank != 2 {
		t.Fatalf("jobs %d, max rows %d, max rank %d", n, maxRows, maxRank)
	}
	var j [4]Job
	for i := range j {
		j[i] = decodeJob(aux[i*JobSize:])
	}
	table := int64(4 * 4 * 8) // rows x rotary float32
	switch {
	case j[0].CosSin != 4*JobSize || j[1].CosSin != j[0].CosSin:
		t.Fatalf("one Positions slice, two tables: %d, %d", j[0].CosSin, j[1].CosSin)
	case j[2].CosSin != j[0].CosSin+table || j[3].CosSin != j[2].CosSin:
		t.Fatalf("one implicit run, two tables: %d, %d", j[2].CosSin, j[3].CosSin)
	case j[3].Gates != j[2].CosSin+table || int64(len(aux)) != j[3].Gates+8:
		t.Fatalf("gates at %d in %d aux bytes", j[3].Gates, len(aux))
	case j[0].Gates != -1:
		t.Fatal("ungated job has gates")
	}
}

func TestEncodeRejects(t *testing.T) {
	for _, c := range []struct {
		name   string
		target Target
		noRoPE bool
		cols   int
	}{
		{name: "head outside layout", target: Target{Head: 2}},
		{name: "rows past the tokens", target: Target{Token: 29}},
		{name: "negative token", target: Target{Token: -1}},
		{name: "gates of another rank", target: Target{Gates: []float32{1}}},
		{name: "rotation without rope", target: Target{Rotate: true}, noRoPE: true},
		{name: "positions of 3 rows", target: Target{Rotate: true, Positions: []int64{1, 2, 3}}},
		{name: "factors of another dim", target: Target{}, cols: 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, lay, spans := encodeFixture(t)
			if c.noRoPE {
				r.rope = nil
			}
			if c.cols != 0 {
				spans[0].Layout.Cols = c.cols
			}
			if _, _, _, _, err := r.encode(lay, []Target{c.target}, spans[:1]); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s: %v, want ErrInvalidArgument", c.name, err)
			}
		})
	}
}

func TestWrap(t *testing.T) {
	dev := CPU()
	mem := make([]byte, 64)
	b, err := WrapHost(dev, mem)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := dev.NewStream()
	defer s.Close()
	part, _ := b.Sub(8, 4)
	if err := s.CopyHtoD(part, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if mem[8] != 1 || mem[11] != 4 {
		t.Fatalf("a copy into a wrapped buffer did not reach the caller's memory: %v", mem[:16])
	}
	if err := dev.Free(b); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Free of a wrapped buffer: %v", err)
	}
	if _, err := WrapDevice(dev, 0x1000, 64); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("WrapDevice on the CPU device: %v", err)
	}
	if _, err := WrapHost(CPU(), nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("WrapHost of nothing: %v", err)
	}
}
