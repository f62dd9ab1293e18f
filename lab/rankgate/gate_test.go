package rankgate

import (
	"math"
	"math/rand/v2"
	"testing"
)

// synthSamples are samples with random decaying spectra, spans of 16 to 200
// rows of 64 dims.
func synthSamples(n, r int, seed uint64) []*Sample {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]*Sample, n)
	for k := range out {
		rows := 16 + rng.IntN(185)
		decay := 0.5 + 0.45*rng.Float64()
		s := make([]float32, min(rows, r))
		v := 1.0
		for i := range s {
			s[i] = float32(v * (0.8 + 0.4*rng.Float64()))
			v *= decay
		}
		for i := 1; i < len(s); i++ {
			s[i] = min(s[i], s[i-1])
		}
		var top float64
		for _, x := range s {
			top += float64(x) * float64(x)
		}
		total := top * (1 + 0.05*rng.Float64())
		sm := &Sample{E: make([]float64, r), Tail: 1, Avail: len(s), Rows: rows, Cols: 64, Layer: k % 4, Value: k%2 == 1,
			Cost: float64((rows+65)*FactorSize) / float64(rows*64*2)}
		p := &Params{R: r}
		sm.Features = p.Gate().Features(s, total, rows, 64, sm.Layer, 4, sm.Value)
		for i, x := range s {
			sm.E[i] = float64(x) * float64(x) / total
			sm.Tail -= sm.E[i]
		}
		out[k] = sm
	}
	return out
}

// TestGradFiniteDifferences: Grad's analytic gradient of the mean loss
// matches central differences in every parameter vector.
func TestGradFiniteDifferences(t *testing.T) {
	p, err := NewParams(6, 5, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.B2 {
		p.B2[i] = 0.3 * float64(i-2)
	}
	samples := synthSamples(12, 6, 7)
	const lambda = 0.7
	g := p.zero()
	p.Grad(g, samples, lambda)
	pv, gv := p.Vectors(), g.Vectors()
	names := []string{"W1", "B1", "W2", "B2"}
	const h = 1e-6
	for k := range pv {
		for i := range pv[k] {
			old := pv[k][i]
			pv[k][i] = old + h
			up := p.MeanLoss(samples, lambda)
			pv[k][i] = old - h
			down := p.MeanLoss(samples, lambda)
			pv[k][i] = old
			fd := (up - down) / (2 * h)
			if d := math.Abs(fd - gv[k][i]); d > 1e-7+1e-5*math.Abs(fd) {
				t.Fatalf("%s[%d]: analytic %.10g, finite differences %.10g", names[k], i, gv[k][i], fd)
			}
		}
	}
}

// TestLossExact: the loss's error term is the squared error of the span
// with gated singular values, and 0/1 gates give Err's truncation error.
func TestLossExact(t *testing.T) {
	s := &Sample{E: []float64{0.5, 0.3, 0.15}, Tail: 0.05, Cost: 0.1}
	m := []float64{1, 0.5, 0}
	if got, want := s.Loss(m, 2), 0.25*0.3+0.15+0.05+2*0.1*1.5; math.Abs(got-want) > 1e-15 {
		t.Fatalf("loss %v, want %v", got, want)
	}
	if got, want := s.Loss([]float64{1, 1, 0}, 0), s.Err(2)*s.Err(2); math.Abs(got-want) > 1e-15 {
		t.Fatalf("hard-gated loss %v, truncation error squared %v", got, want)
	}
}

// TestGatesMatchStore: the trainer's float64 forward is the store's
// RankGate.Gates (up to float32 weights).
func TestGatesMatchStore(t *testing.T) {
	p, err := NewParams(8, 7, 5)
	if err != nil {
		t.Fatal(err)
	}
	g := p.Gate()
	q := FromGate(g)
	for _, s := range synthSamples(20, 8, 9) {
		a, b, c := p.Gates(s.Features), g.Gates(s.Features), q.Gates(s.Features)
		for i := range a {
			if math.Abs(a[i]-b[i]) > 1e-5 || b[i] != c[i] {
				t.Fatalf("gate %d: trainer %v, store %v, round trip %v", i, a[i], b[i], c[i])
			}
		}
	}
	if _, err := NewParams(0, 4, 1); err == nil {
		t.Fatal("a gate of r_max 0 was made")
	}
}
