package assemble

import (
	"context"
	"errors"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// TestOpenRelease: Open holds every source it opened, releases them all on
// a failed open or spec lookup and on Release (once), and Run after
// Release is the caller's closed error.
func TestOpenRelease(t *testing.T) {
	closed := errors.New("closed")
	srcs := []*memSource{newMemSource(t, 3, 1, true), newMemSource(t, 5, 2, false)}
	released := make([]int, len(srcs))
	open := func(fail int) func(i int) (Item, func(), error) {
		return func(i int) (Item, func(), error) {
			if i == fail {
				return Item{}, nil, errors.New("open failed")
			}
			return Item{Src: srcs[i], Offset: int64(10 * i)}, func() { released[i]++ }, nil
		}
	}
	spec := func() (*format.ModelSpec, error) { return &testSpec, nil }
	if _, err := Open(0, open(-1), spec, closed); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no items: %v", err)
	}
	if _, err := Open(2, open(1), spec, closed); err == nil || released[0] != 1 || released[1] != 0 {
		t.Fatalf("failed open: %v, released %v", err, released)
	}
	noSpec := errors.New("no spec")
	if _, err := Open(2, open(-1), func() (*format.ModelSpec, error) { return nil, noSpec }, closed); !errors.Is(err, noSpec) || released[0] != 2 || released[1] != 1 {
		t.Fatalf("failed spec: %v, released %v", err, released)
	}
	h, err := Open(2, open(-1), spec, closed)
	if err != nil {
		t.Fatal(err)
	}
	if h.Tokens() != 8 || h.Source(1) != Source(srcs[1]) || h.Packets()[1].Offset != 10 {
		t.Fatalf("held assembly: %d tokens, packets %+v", h.Tokens(), h.Packets())
	}
	if err := h.Run(context.Background(), newDest(format.KVLayoutHND, 0)(t, 8), nil); err != nil {
		t.Fatal(err)
	}
	h.Release()
	h.Release()
	if released[0] != 3 || released[1] != 2 {
		t.Fatalf("Release twice: released %v, want each source once more", released)
	}
	if err := h.Run(context.Background(), newDest(format.KVLayoutHND, 0)(t, 8), nil); !errors.Is(err, closed) {
		t.Fatalf("Run after Release: %v", err)
	}
}

// TestPrepareDynamicRoPE: with dynamic NTK scaling, an assembly reaching
// past original_max_position_embeddings is ErrInvalidArgument; one ending
// at it is prepared (the shift is exact there).
func TestPrepareDynamicRoPE(t *testing.T) {
	spec := testSpec
	spec.RoPE.Scaling, spec.RoPE.Factor, spec.RoPE.OriginalMaxPos = format.RoPEScalingDynamic, 2, 16
	a, b := newMemSource(t, 4, 1, true), newMemSource(t, 8, 2, true)
	if _, err := Prepare(&spec, []Item{{Src: a, Offset: 12}, {Src: b, Offset: 8}}); err != nil {
		t.Fatalf("ending at position 16: %v", err)
	}
	if _, err := Prepare(&spec, []Item{{Src: a, Offset: 0}, {Src: b, Offset: 9}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("reaching position 17: %v", err)
	}
	if _, err := Prepare(&testSpec, []Item{{Src: b, Offset: 100}}); err != nil {
		t.Fatalf("no dynamic scaling: %v", err)
	}
}

// TestRunInto: RunInto allocates the destination of the shape asked for and
// fills it as Run fills NewContiguous's, which is New's contiguous shape;
// a shape that does not fit is ErrInvalidArgument.
func TestRunInto(t *testing.T) {
	srcs := []*memSource{newMemSource(t, 3, 5, true), newMemSource(t, 4, 6, false)}
	h, err := Open(2, func(i int) (Item, func(), error) { return Item{Src: srcs[i], Offset: int64(7 * i)}, func() {}, nil },
		func() (*format.ModelSpec, error) { return &testSpec, nil }, errors.New("closed"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	got, err := h.RunInto(context.Background(), Shape{Layout: format.KVLayoutHND}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := NewContiguous(&testSpec, h.Tokens())
	if sized, err := New(&testSpec, h.Tokens(), Shape{Layout: format.KVLayoutHND}); err != nil || len(sized.K) != len(want.K) || len(sized.K[0]) != len(want.K[0]) || want.Layout != format.KVLayoutHND {
		t.Fatalf("NewContiguous is not New's contiguous shape: %v", err)
	}
	if err := h.Run(context.Background(), want, nil); err != nil {
		t.Fatal(err)
	}
	for l := range want.K {
		if string(got.K[l]) != string(want.K[l]) || string(got.V[l]) != string(want.V[l]) {
			t.Fatalf("layer %d: RunInto's destination differs from Run's", l)
		}
	}
	if _, err := h.RunInto(context.Background(), Shape{Layout: format.KVLayoutPagedNHD}, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("paged shape without a block size: %v", err)
	}
}
