package llama

import (
	"math"
	"testing"
)

func TestProbsKLArgmax(t *testing.T) {
	p := Probs([]float32{0, float32(math.Log(3)), 1000, 1000})
	if math.Abs(p[2]-0.5) > 1e-12 || math.Abs(p[3]-0.5) > 1e-12 || p[0] > 1e-300 {
		t.Fatalf("Probs with a huge logit = %v, want the mass split between the two largest", p)
	}
	p = Probs([]float32{0, float32(math.Log(3))})
	if math.Abs(p[0]-0.25) > 1e-7 || math.Abs(p[1]-0.75) > 1e-7 {
		t.Fatalf("Probs = %v, want [0.25 0.75]", p)
	}
	if got := KL(p, p); got != 0 {
		t.Fatalf("KL(p || p) = %v, want 0", got)
	}
	q := []float64{0.5, 0.5}
	want := p[0]*math.Log(p[0]/0.5) + p[1]*math.Log(p[1]/0.5) // ~ 0.25 ln 0.5 + 0.75 ln 1.5
	if got := KL(p, q); math.Abs(got-want) > 1e-12 || math.Abs(got-0.1308120359) > 1e-7 {
		t.Fatalf("KL = %v, want %v", got, want)
	}
	if got := KL([]float64{0, 1}, []float64{1, 0}); !math.IsInf(got, 1) {
		t.Fatalf("KL with q = 0 where p > 0 = %v, want +Inf", got)
	}
	if got := Argmax([]float64{0.1, 0.4, 0.4, 0.1}); got != 1 {
		t.Fatalf("Argmax = %d, want the first of the tied maxima, 1", got)
	}
}

func TestLogitsKL(t *testing.T) {
	p, q := []float32{0, float32(math.Log(3))}, []float32{0, 0}
	want := KL(Probs(p), Probs(q))
	if got := LogitsKL(p, q); math.Abs(got-want) > 1e-12 || got <= 0 {
		t.Fatalf("LogitsKL = %v, want %v", got, want)
	}
	if got := LogitsKL(p, p); got != 0 {
		t.Fatalf("LogitsKL(p, p) = %v, want 0", got)
	}
	lp := LogProbs([]float32{1000, 1000})
	if math.Abs(lp[0]-math.Log(0.5)) > 1e-12 {
		t.Fatalf("LogProbs of huge equal logits = %v, want ln 0.5 each", lp)
	}
	if got := LogitsArgmax([]float32{1, 3, 3, 2}); got != 1 {
		t.Fatalf("LogitsArgmax = %d, want 1", got)
	}
}
