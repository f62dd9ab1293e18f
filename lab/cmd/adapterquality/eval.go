package main

import (
	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/train"
)

// scores are one method's figures over a request set.
type scores struct {
	KLNext    float64 // mean KL(full || method) of the next token after the question
	Top1Next  float64 // share of requests whose next-token argmax agrees
	KLCont    float64 // mean KL over the continuation's positions
	Top1Cont  float64 // share of continuation positions whose argmax agrees
	Positions int
}

// reference is the full recompute of one request: its greedy continuation
// and the logits at each of its positions (teacher forced).
type reference struct {
	cont   []int
	logits [][]float32
}

func fullReference(m *llama.Model, r train.Request, cont int) (reference, error) {
	prompt := r.Flat()
	var ref reference
	res, err := m.Forward(prompt, 0, nil, llama.ForwardOptions{LastOnly: true})
	for err == nil {
		ref.logits = append(ref.logits, res.Logits[0])
		if len(ref.logits) == cont {
			return ref, nil
		}
		next := llama.LogitsArgmax(res.Logits[0])
		ref.cont = append(ref.cont, next)
		res, err = m.Forward([]int{next}, int64(len(prompt)+len(ref.cont)-1), res.Cache, llama.ForwardOptions{LastOnly: true})
	}
	return ref, err
}

// packetsCache is BOS prefilled alone, then each document prefilled alone
// with a (nil: none) and re-rotated to its place, as Assemble does.
func packetsCache(m *llama.Model, a *adapter.Adapter, docs [][]int) (*llama.Cache, error) {
	bos, err := m.Forward([]int{1}, 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, err
	}
	all := bos.Cache
	for _, d := range docs {
		kv, err := a.Prefill(m, d)
		if err != nil {
			return nil, err
		}
		c, err := m.CacheOf(kv.K, kv.V)
		if err != nil {
			return nil, err
		}
		if err := c.Shift(m.RoPE(), int64(all.Len())-c.Positions[0]); err != nil {
			return nil, err
		}
		if err := all.Append(c); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// score runs the question and the reference continuation over cache
// (starting at its length) and compares each position with ref.
func (s *scores) add(m *llama.Model, cache *llama.Cache, question []int, ref reference) error {
	in := append(append([]int(nil), question...), ref.cont...)
	res, err := m.Forward(in, int64(cache.Len()), cache, llama.ForwardOptions{})
	if err != nil {
		return err
	}
	first := len(question) - 1
	for j, want := range ref.logits {
		got := res.Logits[first+j]
		kl := llama.LogitsKL(want, got)
		agree := 0.0
		if llama.LogitsArgmax(want) == llama.LogitsArgmax(got) {
			agree = 1
		}
		if j == 0 {
			s.KLNext += kl
			s.Top1Next += agree
		}
		s.KLCont += kl
		s.Top1Cont += agree
		s.Positions++
	}
	return nil
}

func (s *scores) finish(requests int) {
	s.KLNext /= float64(requests)
	s.Top1Next /= float64(requests)
	s.KLCont /= float64(s.Positions)
	s.Top1Cont /= float64(s.Positions)
}

// evaluate scores a (nil: no adapter) over the requests against refs.
func evaluate(m *llama.Model, a *adapter.Adapter, rs []train.Request, refs []reference) (scores, error) {
	var s scores
	for i, r := range rs {
		c, err := packetsCache(m, a, r.Docs)
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

// questionAlone scores BOS and the question with no documents.
func questionAlone(m *llama.Model, rs []train.Request, refs []reference) (scores, error) {
	var s scores
	for i, r := range rs {
		bos, err := m.Forward([]int{1}, 0, nil, llama.ForwardOptions{LastOnly: true})
		if err != nil {
			return s, err
		}
		if err := s.add(m, bos.Cache, r.Question, refs[i]); err != nil {
			return s, err
		}
	}
	s.finish(len(rs))
	return s, nil
}
