package gpu

import (
	"fmt"
	"sort"
	"sync"
)

// Arena sub-allocates one device allocation: first fit over a free list
// kept in address order, freed ranges coalesced with their neighbours. One
// big cuMemAlloc up front makes the byte budget exact and keeps
// allocation off the driver (cuMemAlloc and cuMemFree synchronise the
// device). Every block is aligned to ArenaAlign bytes. An Arena is safe for
// concurrent use.
type Arena struct {
	dev  Device
	base Buffer

	mu    sync.Mutex
	free  []arenaRange // address order, no two adjacent
	used  map[int]int  // offset -> size of live blocks
	inUse int
}

type arenaRange struct{ off, n int }

// ArenaAlign is the alignment of every Arena block, enough for any
// element type and for coalesced access.
const ArenaAlign = 256

// NewArena allocates size bytes of dev's memory to sub-allocate.
func NewArena(dev Device, size int) (*Arena, error) {
	size = alignUp(size, ArenaAlign)
	base, err := dev.Alloc(size)
	if err != nil {
		return nil, fmt.Errorf("arena of %d bytes: %w", size, err)
	}
	return &Arena{dev: dev, base: base, free: []arenaRange{{0, size}}, used: map[int]int{}}, nil
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// Base is the whole allocation; a block's Offset() is its place in it.
func (a *Arena) Base() Buffer { return a.base }

// Size is the arena's capacity in bytes.
func (a *Arena) Size() int { return a.base.Len() }

// InUse is the number of bytes in live blocks (rounded to ArenaAlign).
func (a *Arena) InUse() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inUse
}

// Alloc returns a block of n bytes, or an error wrapping ErrBudget when no
// free range is large enough.
func (a *Arena) Alloc(n int) (Buffer, error) {
	if n <= 0 || n > a.base.Len() {
		return Buffer{}, fmt.Errorf("%w: arena: alloc of %d bytes in %d", ErrBudget, n, a.base.Len())
	}
	need := alignUp(n, ArenaAlign)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.used == nil {
		return Buffer{}, fmt.Errorf("%w: arena", ErrClosed)
	}
	for i, r := range a.free {
		if r.n < need {
			continue
		}
		if r.n == need {
			a.free = append(a.free[:i], a.free[i+1:]...)
		} else {
			a.free[i] = arenaRange{r.off + need, r.n - need}
		}
		a.used[r.off] = need
		a.inUse += need
		return a.base.Sub(r.off, n)
	}
	return Buffer{}, fmt.Errorf("%w: arena: no free range of %d bytes (%d of %d in use)", ErrBudget, need, a.inUse, a.base.Len())
}

// Free returns a block from Alloc. Device work that uses it must be done,
// or ordered before any later writer of the memory.
func (a *Arena) Free(b Buffer) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b.mem != a.base.mem {
		return fmt.Errorf("%w: arena: free of a buffer from elsewhere", ErrInvalidArgument)
	}
	off := b.off - a.base.off
	n, ok := a.used[off]
	if !ok || alignUp(b.n, ArenaAlign) != n {
		return fmt.Errorf("%w: arena: free of [%d, +%d), not a live block", ErrInvalidArgument, off, b.n)
	}
	delete(a.used, off)
	a.inUse -= n
	i := sort.Search(len(a.free), func(i int) bool { return a.free[i].off > off })
	a.free = append(a.free, arenaRange{})
	copy(a.free[i+1:], a.free[i:])
	a.free[i] = arenaRange{off, n}
	if i+1 < len(a.free) && off+n == a.free[i+1].off { // merge with the next range
		a.free[i].n += a.free[i+1].n
		a.free = append(a.free[:i+1], a.free[i+2:]...)
	}
	if i > 0 && a.free[i-1].off+a.free[i-1].n == off { // and with the previous
		a.free[i-1].n += a.free[i].n
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
	return nil
}

// Close frees the device allocation. Blocks must not be used afterwards.
func (a *Arena) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.used == nil {
		return nil
	}
	a.used, a.free = nil, nil
	return a.dev.Free(a.base)
}
