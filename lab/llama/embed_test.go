package llama

import (
	"errors"
	"math"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// ForwardEmbeddings of a token's own embedding rows is Forward, bit for
// bit: both run the one forward pass.
func TestForwardEmbeddingsEqualsForward(t *testing.T) {
	m := gradModel(t, gradShape)
	toks := []int{1, 5, 9, 2, 7}
	want, err := m.Forward(toks, 4, nil, ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Embed(toks)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.ForwardEmbeddings(x, 4, nil, ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Logits {
		for j := range want.Logits[i] {
			if math.Float32bits(want.Logits[i][j]) != math.Float32bits(got.Logits[i][j]) {
				t.Fatalf("logit [%d][%d]: %v vs %v", i, j, got.Logits[i][j], want.Logits[i][j])
			}
		}
	}
	if got.Surprisal != nil || got.Cache.Len() != len(toks) {
		t.Fatalf("surprisal %v, cache of %d rows", got.Surprisal, got.Cache.Len())
	}
}

func TestForwardEmbeddingsRejects(t *testing.T) {
	m := gradModel(t, gradShape)
	row := make([]float32, m.Dim)
	nan := append([]float32(nil), row...)
	nan[3] = float32(math.NaN())
	for _, tc := range []struct {
		name string
		x    [][]float32
	}{
		{"none", nil}, {"short row", [][]float32{row[:m.Dim-1]}}, {"nan", [][]float32{row, nan}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := m.ForwardEmbeddings(tc.x, 0, nil, ForwardOptions{}); !errors.Is(err, format.ErrInvalidArgument) {
				t.Errorf("%s: %v", tc.name, err)
			}
		})
	}
	if _, err := m.Embed([]int{m.Vocab}); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("token outside vocab: %v", err)
	}
}

func TestEmbeddingStats(t *testing.T) {
	m := gradModel(t, gradShape)
	mean, std := m.EmbeddingStats()
	// Random draws embeddings from N(0, 1).
	for j := range mean {
		if math.Abs(mean[j]) > 0.5 || std[j] < 0.7 || std[j] > 1.3 {
			t.Fatalf("column %d: mean %v std %v, drawn from N(0, 1)", j, mean[j], std[j])
		}
	}
}
