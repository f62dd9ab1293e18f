package prune

import (
	"errors"
	"slices"
	"testing"
)

func TestSelectKeepsBestAndAnchors(t *testing.T) {
	scores := [][]float32{
		{0.1, 0.9, 0.3, 0.8, 0.0, 0.5},
		{5, 4, 3, 2, 1, 0},
	}
	for _, tc := range []struct {
		name    string
		keep    int
		anchors []int
		want    [][]int32
	}{
		{"top2", 2, nil, [][]int32{{1, 3}, {0, 1}}},
		{"top3", 3, nil, [][]int32{{1, 3, 5}, {0, 1, 2}}},
		{"anchor first", 2, []int{4}, [][]int32{{1, 4}, {0, 4}}},
		{"anchors cap", 2, []int{5, 4, 2}, [][]int32{{4, 5}, {4, 5}}},
		{"all", 6, []int{0}, [][]int32{{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Select(1, 2, 6, scores, tc.keep, tc.anchors)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			for g := range tc.want {
				if !slices.Equal(s.Kept(0, g), tc.want[g]) {
					t.Fatalf("head %d kept %v, want %v", g, s.Kept(0, g), tc.want[g])
				}
			}
			if n, ok := s.Rows(); !ok || n != tc.keep {
				t.Fatalf("Rows() = %d, %v", n, ok)
			}
		})
	}
}

func TestSelectErrors(t *testing.T) {
	sc := [][]float32{{1, 2, 3}}
	for _, tc := range []struct {
		name string
		f    func() error
	}{
		{"keep 0", func() error { _, err := Select(1, 1, 3, sc, 0, nil); return err }},
		{"keep > n", func() error { _, err := Select(1, 1, 3, sc, 4, nil); return err }},
		{"anchor out", func() error { _, err := Select(1, 1, 3, sc, 1, []int{3}); return err }},
		{"rows", func() error { _, err := Select(1, 2, 3, sc, 1, nil); return err }},
		{"row length", func() error { _, err := Select(1, 1, 4, sc, 1, nil); return err }},
		{"tova shape", func() error { _, err := TOVAScores([][][][]float32{{{{1}}}}, 2, 1, 1); return err }},
		{"tova keys", func() error { _, err := TOVAScores([][][][]float32{{{{1}}}}, 1, 2, 1); return err }},
		{"tova query", func() error { _, err := TOVAScores([][][][]float32{{{{1}}}}, 1, 1, 2); return err }},
		{"bad set", func() error { return (&Set{Layers: 1, KVHeads: 1, Tokens: 3, Keep: [][]int32{{2, 1}}}).Validate() }},
		{"empty list", func() error { return (&Set{Layers: 1, KVHeads: 1, Tokens: 3, Keep: [][]int32{{}}}).Validate() }},
		{"set shape", func() error { return (&Set{Layers: 2, KVHeads: 1, Tokens: 3, Keep: [][]int32{{1}}}).Validate() }},
		{"out of span", func() error { return (&Set{Layers: 1, KVHeads: 1, Tokens: 3, Keep: [][]int32{{3}}}).Validate() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f(); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
			}
		})
	}
}

func TestRandomSeeded(t *testing.T) {
	a, err := Random(2, 3, 50, 20, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Random(2, 3, 50, 20, 7)
	c, _ := Random(2, 3, 50, 20, 8)
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	same, differ := true, false
	for g := range a.Keep {
		same = same && slices.Equal(a.Keep[g], b.Keep[g])
		differ = differ || !slices.Equal(a.Keep[g], c.Keep[g])
		if len(a.Keep[g]) != 20 {
			t.Fatalf("list %d keeps %d rows", g, len(a.Keep[g]))
		}
	}
	if !same || !differ {
		t.Fatalf("same seed equal: %v; other seed differs: %v", same, differ)
	}
	// Heads choose differently: the subsets are ragged.
	if slices.Equal(a.Keep[0], a.Keep[1]) {
		t.Fatalf("two heads kept the same random rows %v", a.Keep[0])
	}
}

// TestTOVA builds attention where the last query of each KV head's group
// favours known keys, and checks those are kept; earlier queries are
// ignored with queries = 1 and counted with queries = 2.
func TestTOVA(t *testing.T) {
	const tokens = 5
	row := func(hot ...int) []float32 {
		r := make([]float32, tokens+1) // one extra key: the query itself
		for _, h := range hot {
			r[h] = 0.4
		}
		return r
	}
	// One layer, 4 query heads over 2 KV heads (group of 2).
	att := [][][][]float32{{
		{row(0), row(3)},
		{row(0), row(4)},
		{row(2), row(1)},
		{row(2), row(1, 2)},
	}}
	s, err := TOVA(att, 2, tokens, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Kept(0, 0); !slices.Equal(got, []int32{3, 4}) {
		t.Fatalf("kv head 0 kept %v, want [3 4]", got)
	}
	if got := s.Kept(0, 1); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("kv head 1 kept %v, want [1 2]", got)
	}
	sc, err := TOVAScores(att, 2, tokens, 2)
	if err != nil {
		t.Fatal(err)
	}
	if sc[0][0] != 0.8 || sc[1][2] != 1.2 {
		t.Fatalf("two-query scores %v", sc)
	}
}

func TestBudgetAndAnchors(t *testing.T) {
	for _, tc := range []struct {
		n    int
		f    float64
		want int
	}{{100, 0.25, 25}, {10, 0.75, 8}, {3, 0.01, 1}, {4, 1, 4}} {
		if got := Budget(tc.n, tc.f); got != tc.want {
			t.Errorf("Budget(%d, %v) = %d, want %d", tc.n, tc.f, got, tc.want)
		}
	}
	if got := FirstAnchors(10, 2, 3); !slices.Equal(got, []int{0, 1, 7, 8, 9}) {
		t.Fatalf("FirstAnchors = %v", got)
	}
	if got := FirstAnchors(3, 2, 3); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("FirstAnchors overlapping = %v", got)
	}
}
