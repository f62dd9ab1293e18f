package main

import (
	"testing"

	"github.com/kvstore/kvstore/lab/llama"
)

// valueOnly keeps the teacher rows after the question's last token and
// after each of the value's bytes, and leaves the example it copies alone.
func TestValueOnly(t *testing.T) {
	question, value := []int{9, 'r', ' ', '"'}, []int{'a', 'b', 'c'}
	ex := &llama.PacketExample{Docs: [][]int{{1, 2}}, Query: append(append([]int(nil), question...), value...)}
	for i := range ex.Query {
		ex.Teacher = append(ex.Teacher, []float64{float64(i)})
	}
	v := valueOnly(ex, len(value))
	if len(v.Teacher) != len(value)+1 || len(ex.Teacher) != len(question)+len(value) {
		t.Fatalf("value-only teacher rows %d, the example's %d", len(v.Teacher), len(ex.Teacher))
	}
	for j, p := range v.Teacher {
		if want := float64(len(question) - 1 + j); p[0] != want {
			t.Fatalf("value-only row %d is the teacher's after token %v, want %v", j, p[0], want)
		}
	}
	if &v.Query[0] != &ex.Query[0] || len(v.Query) != len(ex.Query) {
		t.Fatal("the value-only example reads a different continuation")
	}
}
