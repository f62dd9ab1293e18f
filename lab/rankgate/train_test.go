package rankgate

import (
	"context"
	"errors"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// TestTrainLowersLoss: Adam lowers the mean loss, and a run stopped and
// resumed from its State ends where an unbroken one does.
func TestTrainLowersLoss(t *testing.T) {
	samples := synthSamples(300, 8, 11)
	o := Options{Lambda: 0.5, Steps: 120, Batch: 32, LR: 1e-2, Seed: 3}
	p, err := NewParams(8, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	before := p.MeanLoss(samples, o.Lambda)
	whole := NewState(p.Clone())
	if err := Train(context.Background(), whole, samples, o, nil); err != nil {
		t.Fatal(err)
	}
	after := whole.P.MeanLoss(samples, o.Lambda)
	if !(after < 0.8*before) {
		t.Fatalf("mean loss %v before, %v after training", before, after)
	}
	ctx, cancel := context.WithCancel(context.Background())
	half := NewState(p.Clone())
	err = Train(ctx, half, samples, o, func(step int, _ float64) {
		if step == 50 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || half.Step != 50 {
		t.Fatalf("cancelled run: step %d, %v", half.Step, err)
	}
	if err := Train(context.Background(), half, samples, o, nil); err != nil {
		t.Fatal(err)
	}
	for k, v := range half.P.Vectors() {
		for i, x := range v {
			if x != whole.P.Vectors()[k][i] {
				t.Fatalf("resumed run differs from an unbroken one at vector %d [%d]", k, i)
			}
		}
	}
	if err := Train(context.Background(), NewState(p.Clone()), nil, o, nil); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("training on no samples: %v", err)
	}
}
