package prune

import (
	"errors"
	"slices"
	"testing"
)

func TestWindow(t *testing.T) {
	for _, c := range []struct {
		name                string
		tokens, keep, sinks int
		want                []int32
	}{
		{"sinks and recent", 10, 5, 2, []int32{0, 1, 7, 8, 9}},
		{"no sinks", 10, 3, 0, []int32{7, 8, 9}},
		{"sinks fill the budget", 10, 2, 4, []int32{0, 1}},
		{"everything", 6, 6, 4, []int32{0, 1, 2, 3, 4, 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Window(2, 3, c.tokens, c.keep, c.sinks)
			if err != nil {
				t.Fatal(err)
			}
			for g, k := range s.Keep {
				if !slices.Equal(k, c.want) {
					t.Fatalf("row %d keeps %v, want %v", g, k, c.want)
				}
			}
		})
	}
	if _, err := Window(1, 1, 10, 3, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative sinks: %v", err)
	}
	if _, err := Window(1, 1, 10, 11, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("keep above tokens: %v", err)
	}
}
