package assemble

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Options are the per-call settings of Run. The zero value (or nil) uses
// every core and reports nothing per layer.
type Options struct {
	// OnLayer, when not nil, is called with 0, 1, ..., Layers-1 in order,
	// from the goroutine running Assemble, as soon as layer l's K and V are
	// complete in the destination (and verified), so that a server can
	// compute layer l while later layers are still being filled. Workers
	// keep filling later layers while it runs. An error it returns stops
	// the assembly and is returned, wrapped.
	OnLayer func(layer int) error
	// Workers is how many goroutines fill the destination; 0 means
	// GOMAXPROCS, or fewer for a small assembly: one per workerMin bytes
	// placed, at least one.
	Workers int
}

// workerMin is the fewest bytes a default worker places: handing a few
// hundred KiB to a second goroutine and waiting for it cost more than
// the copy saved on a loaded two-core machine (llamacpp's
// BenchmarkRestore at 256 tokens), while 1 MiB split in two was faster.
const workerMin = 512 << 10

// Run fills dst and returns when every layer is complete and reported, or
// at the first error. A destination that does not fit is
// ErrInvalidArgument, and nothing is written to it then. ctx is checked
// before each work item (one layer's K or V of one packet): once it is
// done, Run stops and returns its error (the layers already reported stay
// valid).
func (a *Assembly) Run(ctx context.Context, dst *Dest, o *Options) error {
	if o == nil {
		o = &Options{}
	}
	if dst == nil {
		return fmt.Errorf("%w: assemble: nil destination", ErrInvalidArgument)
	}
	if o.Workers < 0 {
		return fmt.Errorf("%w: assemble: %d workers", ErrInvalidArgument, o.Workers)
	}
	g, err := dst.check(&a.spec, a.tokens)
	if err != nil {
		return err
	}
	size := 2 * int64(a.spec.Layers) * int64(a.tokens) * int64(g.heads) * int64(g.rowBytes)
	g.stream = size >= int64(streamMin)
	workers := o.Workers
	if workers == 0 {
		workers = int(min(int64(runtime.GOMAXPROCS(0)), max(1, size/workerMin)))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	r := &run{ctx: ctx, a: a, dst: dst, g: g, items: 2 * len(a.packets) * a.spec.Layers}
	r.left = make([]atomic.Int32, a.spec.Layers)
	for l := range r.left {
		r.left[l].Store(int32(2 * len(a.packets)))
	}
	r.done = make(chan int, a.spec.Layers)
	return r.run(min(workers, r.items), o.OnLayer)
}

// run is one Run: work items (layer, packet, K|V) taken in layer order by
// workers, and per-layer countdowns that report complete layers.
type run struct {
	ctx   context.Context
	a     *Assembly
	dst   *Dest
	g     *geom
	items int
	next  atomic.Int64
	left  []atomic.Int32 // per layer: items not yet done
	done  chan int       // layers whose items are all done, in any order

	stop    atomic.Bool
	errOnce sync.Once
	err     error
}

// run starts the workers and reports layers in order as they complete.
// Without onLayer the calling goroutine is one of the workers, so one
// worker starts no goroutine: a small restore took longer to hand to a
// goroutine and back than to copy on a loaded machine. With onLayer it
// only reports, so that a layer is reported while later ones are filled.
func (r *run) run(workers int, onLayer func(int) error) error {
	if onLayer == nil {
		workers--
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work()
		}()
	}
	if onLayer == nil {
		r.work()
		wg.Wait()
		if err := r.ctx.Err(); err != nil && !r.stop.Load() {
			r.fail(fmt.Errorf("assemble: %w", err))
		}
		return r.err
	}
	go func() {
		wg.Wait()
		close(r.done)
	}()
	complete := make([]bool, len(r.left))
	reported := 0
	for l := range r.done {
		complete[l] = true
		for reported < len(complete) && complete[reported] && !r.stop.Load() {
			if err := r.ctx.Err(); err != nil {
				r.fail(fmt.Errorf("assemble: before layer %d: %w", reported, err))
				break
			}
			if onLayer != nil {
				if err := onLayer(reported); err != nil {
					r.fail(fmt.Errorf("assemble: layer %d callback: %w", reported, err))
					break
				}
			}
			reported++
		}
	}
	return r.err // every write to it happened before done was closed, or here
}

// fail records the first error and stops the workers.
func (r *run) fail(err error) {
	r.errOnce.Do(func() { r.err = err })
	r.stop.Store(true)
}

// work takes items until none is left or the run stops.
func (r *run) work() {
	w := getWorker()
	defer w.put()
	per := 2 * len(r.a.packets)
	for !r.stop.Load() {
		i := int(r.next.Add(1) - 1)
		if i >= r.items {
			return
		}
		if err := r.ctx.Err(); err != nil {
			r.fail(fmt.Errorf("assemble: %w", err))
			return
		}
		l, p, key := i/per, i%per/2, i%2 == 0
		dst := r.dst.V[l]
		if key {
			dst = r.dst.K[l]
		}
		pk := &r.a.packets[p]
		if err := pk.src.Guard(func() error { return r.a.fill(w, r.g, dst, pk, l, key) }); err != nil {
			r.fail(err)
			return
		}
		if r.left[l].Add(-1) == 0 {
			r.done <- l
		}
	}
}
