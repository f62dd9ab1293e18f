package main

import (
	"fmt"
	"strconv"

	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/train"
)

// An oracle prefills every document of a request after BOS and a context
// taken from the requests themselves, then drops the context's rows, as a
// hidden header's are dropped: the packet is the document's rows, and the
// question reads BOS and those packets at the same positions as the full
// recompute. It bounds what a hidden header could reach: no per-document
// adapter knows a request's other documents, and the oracle may.
type oracle struct {
	label string
	// context is what document j of request i is prefilled after (BOS
	// not included).
	context func(rs []train.Request, i, j int) []int
}

// oracleOf parses one -oracle value: "all" (the true text before the
// document in its request: its predecessors, so the packets are the full
// recompute's rows), k (the last k tokens of that text), or "other" (the
// documents before the same place in the next request: real text of the
// same length, the wrong content).
func oracleOf(s string) (oracle, error) {
	before := func(r train.Request, j int) []int {
		var t []int
		for _, d := range r.Docs[:j] {
			t = append(t, d...)
		}
		return t
	}
	switch s {
	case "all":
		return oracle{"oracle context: the true predecessors", func(rs []train.Request, i, j int) []int { return before(rs[i], j) }}, nil
	case "other":
		return oracle{"oracle context: another request's documents, as long", func(rs []train.Request, i, j int) []int {
			o := rs[(i+1)%len(rs)]
			var t []int
			for k := range j {
				t = append(t, o.Docs[k%len(o.Docs)]...)
			}
			return t
		}}, nil
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 0 {
		return oracle{}, fmt.Errorf("-oracle %q: want all, other or a token count", s)
	}
	return oracle{fmt.Sprintf("oracle context: the last %d true tokens before each document", k), func(rs []train.Request, i, j int) []int {
		t := before(rs[i], j)
		return t[max(0, len(t)-k):]
	}}, nil
}

// cache is request i's BOS and its documents, each prefilled after BOS
// and its context, the context's rows dropped, re-rotated to its place.
func (o oracle) cache(m *llama.Model, rs []train.Request, i int) (*llama.Cache, error) {
	bos, err := m.Forward([]int{train.BOS}, 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, err
	}
	all := bos.Cache
	for j, d := range rs[i].Docs {
		pre := append([]int{train.BOS}, o.context(rs, i, j)...)
		res, err := m.Forward(append(pre, d...), 0, nil, llama.ForwardOptions{LastOnly: true})
		if err != nil {
			return nil, err
		}
		c := res.Cache.Slice(len(pre), res.Cache.Len())
		if err := c.Shift(m.RoPE(), int64(all.Len())-c.Positions[0]); err != nil {
			return nil, err
		}
		if err := all.Append(c); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// evaluate scores the oracle over the requests against refs.
func (o oracle) evaluate(m *llama.Model, rs []train.Request, refs []reference) (scores, error) {
	var s scores
	for i, r := range rs {
		c, err := o.cache(m, rs, i)
		if err != nil {
			return s, err
		}
		if err := s.add(m, c, r.Question, refs[i]); err != nil {
			return s, err
		}
	}
	s.finish(len(rs))
	return s, nil
}
