package spanmem

import (
	"errors"
	"math"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/kvstore/kvstore/format"
)

// constGate returns a gate of r_max r whose gates ignore the input: the
// first keep open (logit +6), the rest shut (-6).
func constGate(r, hidden, keep int) *RankGate {
	in := RankGateInputs(r)
	g := &RankGate{MaxRank: r, Hidden: hidden, W1: make([]float32, hidden*in), B1: make([]float32, hidden),
		W2: make([]float32, r*hidden), B2: make([]float32, r)}
	for i := range g.B2 {
		g.B2[i] = -6
		if i < keep {
			g.B2[i] = 6
		}
	}
	return g
}

func gateArtifact(t *testing.T, g *RankGate) Artifact {
	t.Helper()
	data, meta, err := EncodeRankGate(g)
	if err != nil {
		t.Fatal(err)
	}
	return Artifact{Data: data, Meta: meta, Hash: blake3.Sum256(data)}
}

func TestRankGateRoundTrip(t *testing.T) {
	g := constGate(4, 3, 2)
	for i := range g.W1 {
		g.W1[i] = float32(i%7) - 3
	}
	g.B1[1], g.W2[5] = 0.25, -1.5
	data, meta, err := EncodeRankGate(g)
	if err != nil {
		t.Fatal(err)
	}
	if want := 8 + 4*(3*RankGateInputs(4)+3+4*3+4); len(data) != want || string(data[:4]) != "KVRG" || data[4] != 4 || data[6] != 3 || meta.DType != 0 || meta.Shape != nil {
		t.Fatalf("encoded %d bytes (%q), meta %+v", len(data), data[:8], meta)
	}
	back, err := DecodeRankGate(data, meta)
	if err != nil {
		t.Fatal(err)
	}
	x := g.Features([]float32{3, 2, 1}, 20, 40, 16, 1, 2, true)
	got, want := back.Gates(x), g.Gates(x)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("gate %d: decoded %v, encoded %v", i, got[i], want[i])
		}
	}
}

func TestRankGateRefusals(t *testing.T) {
	g := constGate(4, 3, 2)
	data, meta, err := EncodeRankGate(g)
	if err != nil {
		t.Fatal(err)
	}
	nan := append([]byte(nil), data...)
	copy(nan[16:], []byte{0, 0, 0xc0, 0x7f})
	with := func(off int, b ...byte) []byte {
		d := append([]byte(nil), data...)
		copy(d[off:], b)
		return d
	}
	cases := []struct {
		name string
		data []byte
		meta format.ArtifactMeta
	}{
		{"short", data[:len(data)-4], meta},
		{"long", append(append([]byte(nil), data...), 0, 0, 0, 0), meta},
		{"header only", data[:7], meta},
		{"magic", with(0, 'K', 'V', 'R', 'X'), meta},
		{"f32 meta", data, format.ArtifactMeta{DType: format.DTypeF32, Shape: []int{len(data) / 4}}},
		{"zero r_max", with(4, 0, 0), meta},
		{"zero hidden", with(6, 0, 0), meta},
		{"huge hidden", with(6, 0xff, 0xff), meta},
		{"other r_max", with(4, 3), meta},
		{"NaN weight", nan, meta},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := DecodeRankGate(c.data, c.meta); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("got %v, want ErrInvalidArgument", err)
			}
		})
	}
	g.W2 = g.W2[1:]
	if _, _, err := EncodeRankGate(g); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("encoding a gate with a short W2: %v", err)
	}
}

func TestRankGateFeatures(t *testing.T) {
	g := constGate(2, 1, 0)
	x := g.Features([]float32{3, 1}, 16, 64, 64, 1, 3, true)
	lf := -math.Log(rankGateLogFloor)
	want := []float64{0.75, 0.25, math.Log(9.0/16+1e-6) / lf, math.Log(1.0/16+1e-6) / lf, 6.0 / 16, 0.5, 0.5, 0.5, 1}
	for i := range want {
		if math.Abs(x[i]-want[i]) > 1e-12 {
			t.Fatalf("features %v, want %v", x, want)
		}
	}
	if r := constGate(3, 2, 2).Rank([]float32{3}, 9, 5, 8, 0, 1, false); r != 1 {
		t.Fatalf("a two-open gate of a rank-1 span keeps %d components", r)
	}
}

// TestBuildRankGateArtifact: a stored rank gate sets every factored span's
// rank (capped by what the span has); a fixed per-head ArtifactRank wins
// over it.
func TestBuildRankGateArtifact(t *testing.T) {
	in := testInput(t, 64, 0)
	art := &artifacts{byName: map[string]Artifact{ArtifactRankGate: gateArtifact(t, constGate(8, 2, 3))}}
	m, err := Build(in, &testOptions, art)
	if err != nil {
		t.Fatal(err)
	}
	factored := 0
	for g, h := range m.Heads {
		for s, f := range h.K {
			if f == nil {
				continue
			}
			factored++
			if f.Rank != 3 || h.V[s].Rank != 3 {
				t.Fatalf("group %d span %d: ranks %d and %d, the gate keeps 3", g, s, f.Rank, h.V[s].Rank)
			}
		}
	}
	if factored == 0 {
		t.Fatal("the fixture factored no span")
	}
	art.ranks = []float32{1, 0, 1, 0}
	m, err = Build(in, &testOptions, art)
	if err != nil {
		t.Fatal(err)
	}
	for g, h := range m.Heads {
		for s, f := range h.K {
			if want := 3 - 2*(1-g%2); f != nil && f.Rank != want {
				t.Fatalf("group %d span %d: rank %d with a fixed rank %v, want %d", g, s, f.Rank, art.ranks[g], want)
			}
		}
	}
	bad := gateArtifact(t, constGate(8, 2, 3))
	bad.Data = bad.Data[4:]
	if _, err := Build(in, &testOptions, &artifacts{byName: map[string]Artifact{ArtifactRankGate: bad}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a truncated gate artifact: %v", err)
	}
}

func FuzzDecodeRankGate(f *testing.F) {
	data, meta, err := EncodeRankGate(constGate(2, 2, 1))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("KVRG\x01\x00\x01\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := DecodeRankGate(data, meta)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("error without ErrInvalidArgument: %v", err)
			}
			return
		}
		back, _, err := EncodeRankGate(g)
		if err != nil || string(back) != string(data) {
			t.Fatalf("decoded gate does not encode back: %v", err)
		}
	})
}
