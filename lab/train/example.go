package train

import (
	"fmt"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
)

// Example builds one distillation example: the teacher reads the documents
// and the question as one sequence from position 0 and greedy-generates
// answer tokens; the example asks the student, reading the question and
// the answer but its last token over the documents' packets, for the
// teacher's distribution at each answer token.
// prefix (may be empty) comes first in both, prefilled without adapter
// rows in the student's.
func Example(m *llama.Model, prefix []int, docs [][]int, question []int, answer int) (*llama.PacketExample, error) {
	if answer < 1 || len(question) == 0 || len(docs) == 0 {
		return nil, fmt.Errorf("%w: train: example of %d documents, a %d-token question, %d answer tokens",
			format.ErrInvalidArgument, len(docs), len(question), answer)
	}
	full := append([]int(nil), prefix...)
	for _, d := range docs {
		full = append(full, d...)
	}
	full = append(full, question...)
	res, err := m.Forward(full, 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, err
	}
	ex := &llama.PacketExample{Prefix: prefix, Docs: docs, Query: append([]int(nil), question...)}
	for {
		p := llama.Probs(res.Logits[0])
		ex.Teacher = append(ex.Teacher, p)
		if len(ex.Teacher) == answer {
			return ex, nil
		}
		next := llama.Argmax(p)
		ex.Query = append(ex.Query, next)
		if res, err = m.Forward([]int{next}, int64(len(full)+len(ex.Teacher)-1), res.Cache, llama.ForwardOptions{LastOnly: true}); err != nil {
			return nil, err
		}
	}
}

// Loss is the mean distillation loss of a (nil: no adapter) over examples.
func Loss(m *llama.Model, a *adapter.Adapter, examples []*llama.PacketExample) (float64, error) {
	var h, t []float64
	hide := false
	if a != nil {
		h, t, hide = to64(a.Header), to64(a.Trailer), a.HideHeader
	}
	var sum float64
	for i, ex := range examples {
		e := *ex
		e.HideHeader = hide
		l, err := m.PacketLoss(h, t, &e, nil, nil)
		if err != nil {
			return 0, fmt.Errorf("train: loss of example %d: %w", i, err)
		}
		sum += l
	}
	return sum / float64(len(examples)), nil
}

// ForcedExample builds a distillation example over a given continuation,
// teacher-forced on both sides: the teacher reads prefix, the documents
// and cont as one sequence from position 0; the student reads cont over
// the documents' packets (after prefix, as Example's does) and is asked
// for the teacher's next-token distribution after every token of cont.
// This is what lab/quality's multi-document needles score (KL over every
// position of the question and the value, the value teacher-forced).
func ForcedExample(m *llama.Model, prefix []int, docs [][]int, cont []int) (*llama.PacketExample, error) {
	if len(cont) == 0 || len(docs) == 0 {
		return nil, fmt.Errorf("%w: train: forced example of %d documents, a %d-token continuation",
			format.ErrInvalidArgument, len(docs), len(cont))
	}
	full := append([]int(nil), prefix...)
	for _, d := range docs {
		full = append(full, d...)
	}
	ctx := len(full)
	full = append(full, cont...)
	res, err := m.Forward(full, 0, nil, llama.ForwardOptions{})
	if err != nil {
		return nil, err
	}
	ex := &llama.PacketExample{Prefix: prefix, Docs: docs, Query: append([]int(nil), cont...)}
	for _, l := range res.Logits[ctx:] {
		ex.Teacher = append(ex.Teacher, llama.Probs(l))
	}
	return ex, nil
}
