package tier

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// Cache makes a local store a cache of the tier, through store's public
// API only. Reads are local first: a packet the store holds is served
// without any request to the tier, so the store keeps serving what it has
// while the tier is down. A packet it lacks is fetched, every part and the
// header checked, Put locally (durably, as any Put) and then served from
// the store: a caller only ever reads the local copy, so no byte reaches it
// that did not pass both the tier's checks and the store's.
//
// Put writes through. Synchronously (Queue nil): the tier first, then the
// local store. Asynchronously (Queue set): a durable spool file in the
// queue first, then the local store; Queue.Run or Drain pushes it later,
// after a crash and a restart too. Either way a packet Put through a Cache
// has a copy outside the local store (in the tier or in the spool) before
// it is in the store, so evicting its local copy (Options.MaxBytes) never
// loses the only one. Packets given to DB.Put directly have no such
// guarantee.
//
// DB and Tier must be set; a Cache is safe for concurrent use.
type Cache struct {
	DB   *store.DB
	Tier *Tier
	// Queue, when set, makes Put asynchronous (see above).
	Queue *Queue

	mu       sync.Mutex
	inflight map[cacheKey]*fill
}

type cacheKey struct {
	ns string
	id format.PacketID
}

// fill is one fetch in progress, shared by every Get that needs it.
type fill struct {
	done chan struct{}
	err  error
}

// Get returns a View of packet (ns, model, id): the local store's, or,
// when the store has no such packet, the one fetched from the tier and
// Put locally first. Errors are store.Get's, or the tier's (ErrNotFound
// when neither holds it, ErrUnavailable, ErrCorruption); a packet stored
// locally for another model is ErrModelMismatch and never fetched.
func (c *Cache) Get(ctx context.Context, ns string, model format.Fingerprint, id format.PacketID) (*store.View, error) {
	v, err := c.DB.Get(ctx, ns, model, id)
	if !errors.Is(err, store.ErrNotFound) {
		return v, err
	}
	if err := c.Ensure(ctx, ns, model, id); err != nil {
		return nil, err
	}
	return c.DB.Get(ctx, ns, model, id)
}

// Ensure makes sure the local store holds packet (ns, model, id), fetching
// it from the tier if it does not. Concurrent calls for one packet share
// one fetch.
func (c *Cache) Ensure(ctx context.Context, ns string, model format.Fingerprint, id format.PacketID) error {
	if ok, err := c.DB.Has(ctx, ns, model, id); ok || err != nil {
		return err
	}
	k := cacheKey{ns, id}
	c.mu.Lock()
	if c.inflight == nil {
		c.inflight = map[cacheKey]*fill{}
	}
	f, ok := c.inflight[k]
	if !ok {
		f = &fill{done: make(chan struct{})}
		c.inflight[k] = f
		go func() {
			// The fetch outlives no caller: it runs under the first
			// caller's context.
			f.err = c.pull(ctx, ns, model, id)
			c.mu.Lock()
			delete(c.inflight, k)
			c.mu.Unlock()
			close(f.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return fmt.Errorf("%w: tier: fetch of packet %s: %w", ErrUnavailable, id.Short(), ctx.Err())
	}
}

// pull fetches one packet and Puts it locally.
func (c *Cache) pull(ctx context.Context, ns string, model format.Fingerprint, id format.PacketID) error {
	p, err := c.Tier.Fetch(ctx, ns, model, id)
	if err != nil {
		return err
	}
	got, err := c.DB.Put(ctx, p)
	if err != nil {
		return fmt.Errorf("tier: packet %s fetched, local put: %w", id.Short(), err)
	}
	if got != id {
		// Fetch checked the header against id, so this is our bug.
		return fmt.Errorf("%w: tier: packet %s fetched but stored as %s", ErrCorruption, id.Short(), got.Short())
	}
	return nil
}

// Put stores p in the tier (Tier.Push: created, or already there), or in
// the queue when Queue is set, then in the local store (store.Put). If the
// tier (or the spool) fails, nothing is stored locally and the error wraps
// ErrUnavailable (or the file system's error): the caller may retry, or
// Put to the DB alone, knowingly.
func (c *Cache) Put(ctx context.Context, p *store.Packet) (format.PacketID, error) {
	if c.Queue != nil {
		if _, err := c.Queue.Add(p); err != nil {
			return format.PacketID{}, err
		}
	} else if _, _, err := c.Tier.Push(ctx, p); err != nil {
		return format.PacketID{}, err
	}
	return c.DB.Put(ctx, p)
}

// Assemble is store.DB.Assemble over packets that may be only in the
// tier: the missing ones are fetched first, up to Options.Parallel
// packets at once (each fetching its parts in parallel too), and Put
// locally; then the local store assembles. An item that cannot be fetched
// fails the call before anything is assembled.
func (c *Cache) Assemble(ctx context.Context, ns string, model format.Fingerprint, items []store.AssembleItem, dst *store.Dest, o *store.AssembleOptions) error {
	if err := c.EnsureAll(ctx, ns, model, items); err != nil {
		return err
	}
	return c.DB.Assemble(ctx, ns, model, items, dst, o)
}

// EnsureAll is Ensure for every item, several at once; the first error
// is returned.
func (c *Cache) EnsureAll(ctx context.Context, ns string, model format.Fingerprint, items []store.AssembleItem) error {
	sem := make(chan struct{}, c.Tier.opts.Parallel)
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = c.Ensure(ctx, ns, model, it.ID)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
