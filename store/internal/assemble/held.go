package assemble

import (
	"context"
	"fmt"
	"sync"

	"github.com/kvstore/kvstore/format"
)

// Held is an Assembly that owns its sources: Open opens them through the
// caller, and Release hands them back, once, after which Run is the
// caller's closed error. It is safe for concurrent use; Run holds it
// shared, Release exclusively, so no source is released under a Run.
type Held struct {
	*Assembly
	release []func()
	closed  error

	mu       sync.RWMutex
	released bool
}

// Open prepares an assembly of n items: open(i) opens item i's source and
// returns it with the function that releases it; spec then gives the model
// spec, and Prepare checks the items against it. closed is the error Run
// wraps after Release. No items is ErrInvalidArgument (nothing opened); on
// any error every source opened is released.
func Open(n int, open func(i int) (Item, func(), error), spec func() (*format.ModelSpec, error), closed error) (*Held, error) {
	if n == 0 {
		return nil, fmt.Errorf("%w: assemble: no packets", ErrInvalidArgument)
	}
	h := &Held{closed: closed}
	ok := false
	defer func() {
		if !ok {
			h.Release()
		}
	}()
	items := make([]Item, n)
	for i := range items {
		it, release, err := open(i)
		if err != nil {
			return nil, err
		}
		items[i] = it
		h.release = append(h.release, release)
	}
	m, err := spec()
	if err != nil {
		return nil, fmt.Errorf("assemble: %w", err)
	}
	if h.Assembly, err = Prepare(m, items); err != nil {
		return nil, err
	}
	ok = true
	return h, nil
}

// Source is item i's source.
func (h *Held) Source(i int) Source { return h.packets[i].src }

// Release releases the sources. It is idempotent.
func (h *Held) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return
	}
	h.released = true
	for _, r := range h.release {
		r()
	}
}

// Run is Assembly.Run while the sources are held: after Release it is the
// closed error.
func (h *Held) Run(ctx context.Context, dst *Dest, o *Options) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.released {
		return fmt.Errorf("%w: assemble: assembly was released", h.closed)
	}
	return h.Assembly.Run(ctx, dst, o)
}

// RunInto is Run into a destination it allocates (New) of shape s, sized
// for the assembly's rows, and returns it.
func (h *Held) RunInto(ctx context.Context, s Shape, o *Options) (*Dest, error) {
	dst, err := New(&h.spec, h.tokens, s)
	if err != nil {
		return nil, err
	}
	if err := h.Run(ctx, dst, o); err != nil {
		return nil, err
	}
	return dst, nil
}
