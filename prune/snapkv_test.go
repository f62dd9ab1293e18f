package prune

import (
	"errors"
	"slices"
	"testing"
)

// TestSnapKV: votes are summed over the window's queries and a KV head's
// query heads, pooled so that a voted row's neighbours score as it does,
// and the observation window is kept first.
func TestSnapKV(t *testing.T) {
	const tokens = 16
	// One layer, two query heads over one KV head, two queries.
	att := [][][][]float32{{make([][]float32, 2), make([][]float32, 2)}}
	for h := range att[0] {
		for q := range att[0][h] {
			att[0][h][q] = make([]float32, tokens)
		}
	}
	att[0][0][0][3] = 0.5 // summed over queries and heads: row 3 gets 0.9
	att[0][1][1][3] = 0.4
	att[0][0][1][10] = 0.6
	sc, err := SnapKVScores(att, 1, tokens, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		row  int
		want float32
	}{{2, 0.9}, {3, 0.9}, {4, 0.9}, {5, 0}, {9, 0.6}, {11, 0.6}, {12, 0}} {
		if sc[0][w.row] != w.want {
			t.Errorf("score of row %d = %v, want %v", w.row, sc[0][w.row], w.want)
		}
	}
	s, err := SnapKV(att, 1, tokens, 2, 3, 2, 5)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{2, 3, 4, 14, 15}; !slices.Equal(s.Keep[0], want) {
		t.Errorf("kept %v, want %v", s.Keep[0], want)
	}
	if _, err := SnapKVScores(att, 1, tokens, 2, 4); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("even kernel: %v, want ErrInvalidArgument", err)
	}
}
