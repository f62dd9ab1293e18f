package quality

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
)

// Multi-document needles.
//
// A request is BOS, 4-8 documents (cuts of held-out Go, whole lines) and a
// question, gocode-2k's recall line `\treturn NAME // "`; one document
// carries the line `const NAME = "VALUE"`, and the value's bytes follow the
// question, teacher-forced. Every method keeps the BOS row as a prefix and
// reads the documents some way (full recompute: the whole context as one
// sequence; packets: each document prefilled alone from position 0 and
// its keys re-rotated to its place, as store.Assemble does), then decodes
// the question and the value over them (decode.go's loop). Scored: the
// value's bytes (mean log-prob, top-1 per byte, all right) and
// KL(full || method) over every position of the question and value. The
// methods are in multidoc_methods.go.

// MultiDocRequest is one multi-document needle.
type MultiDocRequest struct {
	// Docs are the documents' tokens (bytes), without BOS; Docs[Needle]
	// holds the definition.
	Docs   [][]int
	Needle int
	// Name and Value are the constant's; Question is the recall line
	// through its opening quote, `\treturn NAME // "`.
	Name, Value string
	Question    []int
}

// Context is BOS and the documents: what a full recompute prefills.
func (r *MultiDocRequest) Context() []int {
	out := []int{GoBOS}
	for _, d := range r.Docs {
		out = append(out, d...)
	}
	return out
}

// Continuation is the question then the value: what every method decodes.
func (r *MultiDocRequest) Continuation() []int {
	return appendBytes(slices.Clone(r.Question), []byte(r.Value))
}

// Len is the request's tokens: context and continuation.
func (r *MultiDocRequest) Len() int { return len(r.Context()) + len(r.Question) + len(r.Value) }

// MultiDocSpec says what requests MultiDocRequests draws.
type MultiDocSpec struct {
	// Requests is how many; request i has DocsMin + i mod (DocsMax-DocsMin+1)
	// documents, and the needle's rank is spread evenly over the ranks of
	// the requests of each document count.
	Requests         int
	DocsMin, DocsMax int
	// DocMin and DocMax bound a document's bytes (whole lines, the
	// definition included); a request's documents together get at most
	// Limit - 40 bytes (Limit 0: 2048, gocode-2k's context), so a document
	// of an 8-document request is shorter than DocMax.
	DocMin, DocMax int
	Limit          int
	Seed           uint64
	// NeedleFirst puts every needle in the first document, where
	// gocode-2k, trained on definitions in the first eighth of a window,
	// recalls best.
	NeedleFirst bool
}

// multiDocReserve is the tokens a request keeps for BOS, the question and
// the value (at most 1 + 22 + 12).
const multiDocReserve = 40

// MultiDocRequests draws spec's requests from files (held-out Go, each
// document from another file, at a random line start), byte GoBOS read as
// a space.
func MultiDocRequests(files []string, spec MultiDocSpec) ([]*MultiDocRequest, error) {
	if spec.Limit == 0 {
		spec.Limit = 2048
	}
	if spec.Requests < 1 || spec.DocsMin < 1 || spec.DocsMax < spec.DocsMin || spec.DocMin < 48 || spec.DocMax < spec.DocMin ||
		spec.DocsMax*spec.DocMin > spec.Limit-multiDocReserve || len(files) < spec.DocsMax {
		return nil, fmt.Errorf("%w: quality: multi-document requests: %+v from %d files", format.ErrInvalidArgument, spec, len(files))
	}
	var texts [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("quality: %w", err)
		}
		if len(b) >= 2*spec.DocMax {
			texts = append(texts, bytes.ReplaceAll(b, []byte{GoBOS}, []byte{' '}))
		}
	}
	if len(texts) < spec.DocsMax {
		return nil, fmt.Errorf("%w: quality: %d of %d files have %d bytes or more", format.ErrInvalidArgument, len(texts), len(files), 2*spec.DocMax)
	}
	rng := rand.New(rand.NewPCG(spec.Seed, 0x6d646f63)) // "mdoc"
	kinds := spec.DocsMax - spec.DocsMin + 1
	var out []*MultiDocRequest
	for i := range spec.Requests {
		k := spec.DocsMin + i%kinds
		// The j-th of the c requests with k documents puts the needle at
		// rank floor((j+0.5)*k/c): every rank once c >= k, evenly spread.
		j, c := i/kinds, (spec.Requests-i%kinds+kinds-1)/kinds
		rank := min(k-1, int((float64(j)+0.5)*float64(k)/float64(c)))
		if spec.NeedleFirst {
			rank = 0
		}
		r := &MultiDocRequest{Needle: rank}
		r.Name, r.Value = letters(rng, 4+rng.IntN(5)), letters(rng, 6+rng.IntN(7))
		r.Question = appendBytes(nil, []byte("\treturn "+r.Name+` // "`))
		def := []byte(defLine(r.Name, r.Value))
		most := min(spec.DocMax, (spec.Limit-multiDocReserve)/k)
		used := map[int]bool{}
		for d := range k {
			n := spec.DocMin + rng.IntN(most-spec.DocMin+1)
			extra := 0
			if d == rank {
				extra = len(def)
			}
			var doc []byte
			for try := 0; doc == nil; try++ {
				if try == 1000 {
					return nil, fmt.Errorf("%w: quality: no cut of %d-%d bytes of whole lines in %d tries", format.ErrInvalidArgument, spec.DocMin-extra, n-extra, try)
				}
				f := rng.IntN(len(texts))
				if !used[f] {
					doc = cutLines(texts[f], n-extra, spec.DocMin-extra, rng)
					used[f] = doc != nil
				}
			}
			if d == rank {
				starts := []int{0}
				for p, b := range doc[:len(doc)-1] {
					if b == '\n' {
						starts = append(starts, p+1)
					}
				}
				at := starts[rng.IntN(len(starts))]
				doc = slices.Concat(doc[:at], def, doc[at:])
			}
			r.Docs = append(r.Docs, appendBytes(nil, doc))
		}
		out = append(out, r)
	}
	return out, nil
}

// cutLines returns whole lines of text, at most n bytes and at least lo,
// from a random line start, or nil when the cut it drew is too short.
func cutLines(text []byte, n, lo int, rng *rand.Rand) []byte {
	at := rng.IntN(len(text) - n + 1)
	if i := bytes.IndexByte(text[at:], '\n'); i >= 0 && at > 0 {
		at += i + 1
	}
	end := min(len(text), at+n)
	cut := text[at:end]
	cut = cut[:bytes.LastIndexByte(cut, '\n')+1]
	if len(cut) < lo {
		return nil
	}
	return slices.Clone(cut)
}

// MultiDocScore is one method's score on one request.
type MultiDocScore struct {
	NeedleScore
	// KL is the mean KL(full || method) over the question's and value's
	// positions (0 for full recompute); QuestionKL over the positions that
	// predict the question's tokens after its first, ValueKL over those
	// that predict the value's bytes and the byte after them.
	KL, QuestionKL, ValueKL float64
	// Rank is the needle document's index among Docs of them.
	Rank, Docs int
}

// MultiDocRow is one method over every request.
type MultiDocRow struct {
	Method string
	Scores []MultiDocScore
}

func (r *MultiDocRow) mean(f func(MultiDocScore) float64) float64 {
	var s float64
	for _, x := range r.Scores {
		s += f(x)
	}
	return s / float64(len(r.Scores))
}

func (r *MultiDocRow) sorted(f func(MultiDocScore) float64) []float64 {
	v := make([]float64, len(r.Scores))
	for i, x := range r.Scores {
		v[i] = f(x)
	}
	slices.Sort(v)
	return v
}

func logProb(s MultiDocScore) float64    { return s.LogProb }
func top1(s MultiDocScore) float64       { return s.Top1 }
func kl(s MultiDocScore) float64         { return s.KL }
func questionKL(s MultiDocScore) float64 { return s.QuestionKL }
func valueKL(s MultiDocScore) float64    { return s.ValueKL }

// LogProb and Top1 are the means over requests of the value's per-byte
// log-prob and top-1; KL the mean KL.
func (r *MultiDocRow) LogProb() float64 { return r.mean(logProb) }
func (r *MultiDocRow) Top1() float64    { return r.mean(top1) }
func (r *MultiDocRow) KL() float64      { return r.mean(kl) }

// Exact is how many requests had the whole value right.
func (r *MultiDocRow) Exact() int {
	n := 0
	for _, s := range r.Scores {
		if s.Exact {
			n++
		}
	}
	return n
}

// MedianTop1 and WorstTop1 are over requests (worst: lowest); MedianKL
// and WorstKL likewise (worst: highest).
func (r *MultiDocRow) MedianTop1() float64 { return median(r.sorted(top1)) }

// MedianLogProb and WorstLogProb are the median and the lowest of the
// requests' value log-probs per byte.
func (r *MultiDocRow) MedianLogProb() float64 { return median(r.sorted(logProb)) }
func (r *MultiDocRow) WorstLogProb() float64  { return r.sorted(logProb)[0] }
func (r *MultiDocRow) WorstTop1() float64     { return r.sorted(top1)[0] }
func (r *MultiDocRow) MedianKL() float64      { return median(r.sorted(kl)) }
func (r *MultiDocRow) WorstKL() float64       { v := r.sorted(kl); return v[len(v)-1] }

// QuestionKL and ValueKL are the means over requests of the KL on the
// question's and on the value's positions (MultiDocScore), the Median
// ones their medians.
func (r *MultiDocRow) QuestionKL() float64       { return r.mean(questionKL) }
func (r *MultiDocRow) ValueKL() float64          { return r.mean(valueKL) }
func (r *MultiDocRow) MedianQuestionKL() float64 { return median(r.sorted(questionKL)) }
func (r *MultiDocRow) MedianValueKL() float64    { return median(r.sorted(valueKL)) }

// RankTop1 is Top1 over the requests whose needle is in the first
// document, an inner one and the last, and how many there are of each.
func (r *MultiDocRow) RankTop1() (top [3]float64, n [3]int) {
	for _, s := range r.Scores {
		g := 1
		switch s.Rank {
		case 0:
			g = 0
		case s.Docs - 1:
			g = 2
		}
		top[g] += s.Top1
		n[g]++
	}
	for g := range top {
		if n[g] > 0 {
			top[g] /= float64(n[g])
		}
	}
	return top, n
}

// scoreMultiDoc scores logits over r's continuation against full's.
func scoreMultiDoc(r *MultiDocRequest, full, got [][]float32) MultiDocScore {
	cont := r.Continuation()
	nd := &Needle{Tokens: cont, Query: len(r.Question), ValueLen: len(r.Value)}
	s := MultiDocScore{NeedleScore: scoreNeedle(nd, got), Rank: r.Needle, Docs: len(r.Docs)}
	q := len(r.Question) - 1 // positions before q predict the question's tokens
	for i := range got {
		d := llama.LogitsKL(full[i], got[i])
		s.KL += d
		if i < q {
			s.QuestionKL += d
		} else {
			s.ValueKL += d
		}
	}
	s.KL /= float64(len(got))
	if q > 0 {
		s.QuestionKL /= float64(q)
	}
	if n := len(got) - max(q, 0); n > 0 {
		s.ValueKL /= float64(n)
	}
	return s
}

// ScoreValue scores next-token logits over r's continuation (logits[i]
// after its token i, as a decode of it gives them) on the value's bytes:
// what llama.cpp's path is checked with against the lab's.
func ScoreValue(r *MultiDocRequest, logits [][]float32) NeedleScore {
	return scoreNeedle(&Needle{Tokens: r.Continuation(), Query: len(r.Question), ValueLen: len(r.Value)}, logits)
}
