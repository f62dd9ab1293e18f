package gpu

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestArenaCoalesces(t *testing.T) {
	a, err := NewArena(CPU(), 4*ArenaAlign)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var bs []Buffer
	for range 4 {
		b, err := a.Alloc(ArenaAlign - 10)
		if err != nil {
			t.Fatal(err)
		}
		if b.Offset()%ArenaAlign != 0 || b.Len() != ArenaAlign-10 {
			t.Fatalf("block at %d of %d bytes", b.Offset(), b.Len())
		}
		bs = append(bs, b)
	}
	if _, err := a.Alloc(1); !errors.Is(err, ErrBudget) {
		t.Fatalf("alloc from a full arena: %v", err)
	}
	// Free in an order that needs merging on both sides.
	for _, i := range []int{1, 3, 2} {
		if err := a.Free(bs[i]); err != nil {
			t.Fatal(err)
		}
	}
	big, err := a.Alloc(3 * ArenaAlign)
	if err != nil {
		t.Fatalf("three adjacent free blocks did not coalesce: %v", err)
	}
	if big.Offset() != ArenaAlign {
		t.Fatalf("coalesced block at %d, want %d", big.Offset(), ArenaAlign)
	}
	if err := a.Free(bs[1]); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("double free: %v", err)
	}
	other, _ := CPU().Alloc(16)
	if err := a.Free(other); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("free of a foreign buffer: %v", err)
	}
}

// TestArenaRandom runs random allocations and frees against a model: live
// blocks never overlap, InUse is their rounded sum, and after freeing all
// the whole arena is one block again.
func TestArenaRandom(t *testing.T) {
	const size = 64 * ArenaAlign
	a, err := NewArena(CPU(), size)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	live := map[int]Buffer{}
	used := 0
	for range 2000 {
		if rng.IntN(2) == 0 || len(live) == 0 {
			n := 1 + rng.IntN(5*ArenaAlign)
			b, err := a.Alloc(n)
			if errors.Is(err, ErrBudget) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range live {
				if b.Offset() < o.Offset()+o.Len() && o.Offset() < b.Offset()+b.Len() {
					t.Fatalf("block [%d,+%d) overlaps [%d,+%d)", b.Offset(), b.Len(), o.Offset(), o.Len())
				}
			}
			live[b.Offset()] = b
			used += alignUp(n, ArenaAlign)
		} else {
			for off, b := range live {
				if err := a.Free(b); err != nil {
					t.Fatal(err)
				}
				delete(live, off)
				used -= alignUp(b.Len(), ArenaAlign)
				break
			}
		}
		if a.InUse() != used {
			t.Fatalf("InUse %d, model %d", a.InUse(), used)
		}
	}
	for _, b := range live {
		a.Free(b)
	}
	if _, err := a.Alloc(size); err != nil {
		t.Fatalf("after freeing everything the arena is fragmented: %v", err)
	}
}
