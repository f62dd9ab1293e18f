package prune

import (
	"fmt"
	"math"
)

// Calibrated budgets: a kept fraction checked on the document itself.
//
// A stored packet must be pruned from its document alone, before any
// request is seen. Calibrate picks its kept fraction by trying the
// pruning on the document: the caller's probe prunes the document's head
// at a fraction, decodes the document's own last tokens over it, and
// returns how far the result is from the unpruned decode (the mean KL of
// the next-token distributions, say). The least fraction of a ladder whose
// probe stays within a bound is kept; a document the probe finds hard
// keeps more rows, an easy one fewer, where a fixed fraction is either
// wasteful on the first or lossy on the second.

// Calibrate returns the least fraction of ladder (strictly increasing, in
// (0, 1]) whose probe loss is at most bound, and that loss; when none is,
// the last fraction and its loss. probe is called in ladder order, up to
// the first fraction within bound; its error ends the search.
func Calibrate(ladder []float64, bound float64, probe func(f float64) (float64, error)) (f, loss float64, err error) {
	if len(ladder) == 0 || math.IsNaN(bound) || probe == nil {
		return 0, 0, fmt.Errorf("%w: prune: calibrate: %d fractions, bound %v", ErrInvalidArgument, len(ladder), bound)
	}
	for i, x := range ladder {
		if !(x > 0 && x <= 1) || i > 0 && x <= ladder[i-1] {
			return 0, 0, fmt.Errorf("%w: prune: calibrate: fraction %d is %v: want increasing in (0, 1]", ErrInvalidArgument, i, x)
		}
	}
	for _, x := range ladder {
		l, err := probe(x)
		if err != nil {
			return 0, 0, fmt.Errorf("prune: calibrate: probe at %v: %w", x, err)
		}
		if math.IsNaN(l) {
			return 0, 0, fmt.Errorf("%w: prune: calibrate: probe at %v lost NaN", ErrInvalidArgument, x)
		}
		f, loss = x, l
		if l <= bound {
			break
		}
	}
	return f, loss, nil
}
