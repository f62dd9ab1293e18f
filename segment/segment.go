// Package segment cuts a long context into SeKV spans and anchors by token
// surprisal, and summarises each span for routing.
//
// Given the surprisal H_t = -log p(x_t | x_<t) of every token, Split marks a
// boundary at each token whose surprisal exceeds mu + Alpha*sigma (mu and
// sigma taken over the sequence's finite surprisals): the token starts a new
// span. Spans are then held between Options.MinSpan and Options.MaxSpan
// tokens, and the spans too short to be worth factoring are marked to stay at
// full resolution. Anchors (tokens kept at full resolution whatever their
// span) are the attention sinks, the boundary tokens and the tokens above a
// second threshold mu + AnchorAlpha*sigma.
//
// Summaries (summary.go) give each span, per (layer, KV head), the
// surprisal-weighted mean of its pre-RoPE keys and values and that mean key
// projected to d' dimensions by a Projection (projection.go), which routing
// scores queries against.
//
// The package does no I/O. Errors wrap format.ErrInvalidArgument (bad
// arguments) or format.ErrCorruption (bad bytes given to a decoder).
package segment

import (
	"math"
	"sort"
)

// Span is the tokens [Start, End) of a sequence. Factored reports whether
// the span is long enough to be kept as low-rank factors; when false its
// rows stay at full resolution.
type Span struct {
	Start, End int
	Factored   bool
}

// Len is the number of tokens in the span.
func (s Span) Len() int { return s.End - s.Start }

// Segmentation is the result of Split.
type Segmentation struct {
	// Tokens is the length of the sequence.
	Tokens int
	// Spans cover [0, Tokens) in order, without gaps or overlaps; none is
	// longer than MaxSpan. It is empty when Tokens is 0.
	Spans []Span
	// Anchors are the token indices kept at full resolution, ascending and
	// unique.
	Anchors []int
	// Boundaries are the tokens that start a span because of their
	// surprisal, ascending; a subset of Anchors. Starts made by MaxSpan
	// splits are not boundaries.
	Boundaries []int
	// Mean and Std are mu and sigma (population standard deviation) of the
	// finite surprisals; both NaN when there are none.
	Mean, Std float64
	// Threshold and AnchorThreshold are mu + Alpha*sigma and
	// mu + AnchorAlpha*sigma; NaN when there are no finite surprisals.
	Threshold, AnchorThreshold float64
}

// SpanOf returns the index of the span holding token t, or -1 when t is out
// of range.
func (s *Segmentation) SpanOf(t int) int {
	if t < 0 || t >= s.Tokens {
		return -1
	}
	return sort.Search(len(s.Spans), func(i int) bool { return s.Spans[i].End > t })
}

// Split segments a sequence by its per-token surprisal. It is deterministic:
// the same surprisals and options always give the same segmentation.
//
// Non-finite surprisals: NaN (e.g. the first token, which has no context)
// is left out of mu and sigma and is never a boundary or a threshold
// anchor; +Inf is left out of mu and sigma and is always a boundary
// candidate and an anchor; -Inf is left out and never a boundary. Token 0
// always starts the first span and is never a boundary.
//
// Spans are formed in four steps: (1) every token t >= 1 above the
// threshold is a candidate; (2) left to right, a candidate fewer than
// MinSpan tokens after the current span's start is suppressed, the others
// start spans; (3) a last span shorter than MinSpan is merged into the one
// before; (4) spans longer than MaxSpan are cut into ceil(len/MaxSpan)
// near-equal pieces, the longer pieces first.
//
// With sigma = 0 (a constant sequence) no token exceeds the thresholds: the
// spans come from MaxSpan alone and the anchors are the sinks. An empty
// sequence gives an empty segmentation and no error. Errors, for invalid
// options only, wrap format.ErrInvalidArgument.
func Split(surprisal []float32, opts Options) (*Segmentation, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	n := len(surprisal)
	seg := &Segmentation{Tokens: n}
	seg.Mean, seg.Std = surprisalStats(surprisal)
	seg.Threshold = seg.Mean + opts.Alpha*seg.Std
	seg.AnchorThreshold = seg.Mean + opts.AnchorAlpha*seg.Std
	if n == 0 {
		return seg, nil
	}
	starts := []int{0}
	for t := 1; t < n; t++ {
		if above(surprisal[t], seg.Threshold) && t-starts[len(starts)-1] >= opts.MinSpan {
			starts = append(starts, t)
		}
	}
	if k := len(starts); k > 1 && n-starts[k-1] < opts.MinSpan {
		starts = starts[:k-1]
	}
	seg.Boundaries = starts[1:]
	seg.Spans = buildSpans(starts, n, opts)
	seg.Anchors = anchors(surprisal, seg, opts)
	return seg, nil
}

// above reports whether surprisal h passes threshold thr: +Inf always does,
// NaN and -Inf never do, and nothing passes a NaN threshold.
func above(h float32, thr float64) bool {
	if math.IsInf(float64(h), 1) {
		return true
	}
	return float64(h) > thr // false for NaN on either side
}

// buildSpans turns span starts into spans, splitting those over MaxSpan.
func buildSpans(starts []int, n int, opts Options) []Span {
	spans := make([]Span, 0, len(starts))
	for i, s := range starts {
		end := n
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		l := end - s
		pieces := (l + opts.MaxSpan - 1) / opts.MaxSpan
		base, extra := l/pieces, l%pieces
		for p := 0; p < pieces; p++ {
			pl := base
			if p < extra {
				pl++
			}
			spans = append(spans, Span{Start: s, End: s + pl, Factored: pl >= opts.MinFactored})
			s += pl
		}
	}
	return spans
}

// anchors merges sinks, boundaries and tokens above the anchor threshold,
// ascending and unique.
func anchors(surprisal []float32, seg *Segmentation, opts Options) []int {
	sinks := min(max(opts.Sinks, 0), len(surprisal))
	out := make([]int, 0, sinks+len(seg.Boundaries))
	b := 0
	for t, h := range surprisal {
		isBoundary := b < len(seg.Boundaries) && seg.Boundaries[b] == t
		if isBoundary {
			b++
		}
		if t < sinks || isBoundary || above(h, seg.AnchorThreshold) {
			out = append(out, t)
		}
	}
	return out
}

// surprisalStats returns the mean and population standard deviation of the
// finite values of h, in float64 by two passes; both NaN when none is
// finite. A sequence whose finite values are all equal has exactly that
// mean and sigma 0, whatever rounding the sums would have done.
func surprisalStats(h []float32) (mean, std float64) {
	var sum float64
	count := 0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range h {
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		sum += f
		count++
		lo, hi = math.Min(lo, f), math.Max(hi, f)
	}
	switch {
	case count == 0:
		return math.NaN(), math.NaN()
	case lo == hi:
		return lo, 0
	}
	mean = sum / float64(count)
	var ss float64
	for _, v := range h {
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		ss += (f - mean) * (f - mean)
	}
	return mean, math.Sqrt(ss / float64(count))
}
