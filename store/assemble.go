package store

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/reconstruct"
)

// Assemble is KV Packet's recompute-free read: it concatenates the stored
// packets named by items, in item order, into dst, re-rotating each
// packet's keys from their stored local positions 0..n-1 to Offset..Offset+n-1
// (reconstruct.Shift by delta = Offset) and copying its values unchanged.
// Every row a packet holds is placed, its adapter header and trailer rows
// included, so item i's rows are the destination's tokens
// [Row, Row+Tokens) (see Assembly.Packets). A packet stored pruned holds
// k rows per (layer, KV head), each key rotated from its kept position t
// to Offset+t; Assembly.Positions gives their positions (assemble_prune.go).
//
// Offsets are the caller's choice. The usual one is consecutive (each item
// starting where the previous ended, as a server appending retrieved
// documents does), but any offsets >= 0 are accepted, overlapping or out of
// order, since a position is only a rotation of the keys. The destination's
// rows are always the concatenation in item order, whatever the offsets; the
// position of row Row+j of item i is Offset+j. An assembly holds at most
// 2^31-1 rows.
//
// It runs on AssembleOptions.Workers goroutines, each taking (layer,
// packet, K|V) chunks in layer order, and can report each layer as soon as
// it is complete (AssembleOptions.OnLayer). Chunk bytes are read in place
// from the mapped blob files, each verified against its CRC32C the first
// time any reader touches it, the CRC taken as the rows are placed (in the
// same pass where they are copied); on a file system without mmap they
// stream through bounded scratch, their CRC computed on the way. Keys are
// rotated straight into their place, in a paged destination too. Besides
// dst it allocates, per worker, one scratch buffer of 256 KiB (or of one
// token's rows across all KV heads, if larger) when a blob file is not
// mapped, and small per-call tables: nothing proportional to the packets'
// size.
//
// Errors: a packet absent from ns is ErrNotFound, one stored for another
// model ErrModelMismatch (nothing is read from it), a chunk whose bytes fail
// their CRC32C ErrCorruption (a *ChunkError saying where), a bad item or
// destination ErrInvalidArgument. On error dst's contents are unspecified
// (layers already reported through OnLayer stay valid).
//
// Assemble is PrepareAssemble, Assembly.Run and Assembly.Release; use them
// separately to learn the total tokens before allocating dst.
func (db *DB) Assemble(ns string, model format.Fingerprint, items []AssembleItem, dst *Dest, o *AssembleOptions) error {
	a, err := db.PrepareAssemble(ns, model, items)
	if err != nil {
		return err
	}
	defer a.Release()
	return a.Run(dst, o)
}

// AssembleItem is one packet of an assembly: its id and the absolute
// position its first row (its first adapter header row, if any) takes.
type AssembleItem struct {
	ID     format.PacketID
	Offset int64
}

// AssembledPacket says where an item's rows go.
type AssembledPacket struct {
	ID     format.PacketID
	Offset int64 // position of the packet's first row
	Row    int   // index of its first row among the destination's tokens
	// Tokens is the packet's rows: HeaderTokens adapter rows, the
	// document's, then TrailerTokens adapter rows.
	Tokens        int
	HeaderTokens  int
	TrailerTokens int
	// Keep is the keep-set in effect for the item, or nil when every row
	// is placed: the one PrepareAssemblePruned was given, else the stored
	// packet's own when it was stored pruned (View.Keep). Tokens is then
	// its rows per (layer, KV head), and Assembly.Positions says which.
	// It is shared: do not modify it.
	Keep *prune.Set
}

// AssembleOptions are the per-call settings of Assemble. The zero value
// (or nil) uses every core and reports nothing per layer.
type AssembleOptions struct {
	// OnLayer, when not nil, is called with 0, 1, ..., Layers-1 in order,
	// from the goroutine running Assemble, as soon as layer l's K and V are
	// complete in the destination (and verified), so that a server can
	// compute layer l while later layers are still being filled. Workers
	// keep filling later layers while it runs. An error it returns stops
	// the assembly and is returned, wrapped.
	OnLayer func(layer int) error
	// Workers is how many goroutines fill the destination; 0 means
	// GOMAXPROCS.
	Workers int
}

// Assembly is a prepared Assemble: the packets' views are held and their
// headers checked, so the total rows are known before a destination is
// allocated. Run may be called any number of times, concurrently too (into
// distinct destinations). Release it when done; it is safe for concurrent
// use.
type Assembly struct {
	spec    format.ModelSpec
	rope    *reconstruct.RoPE
	packets []assemblePacket
	tokens  int

	mu       sync.RWMutex // Run holds it shared, Release exclusively
	released bool
}

type assemblePacket struct {
	AssembledPacket
	v     *View
	shift *reconstruct.Shifter // rotates keys by Offset; nil when Offset is 0
	// src, when not nil, selects rows while placing (fillPruned): per
	// (layer, KV head), the indexes of the stored rows to place, in order.
	// nil: every stored row is placed, as stored.
	src [][]int32
}

// PrepareAssemble looks up every item's packet in namespace ns for model
// and returns an Assembly holding their views. Errors are those of Get
// (ErrNotFound, ErrModelMismatch), ErrInvalidArgument for no items or a
// negative offset, and ErrCorruption for a header that does not match the
// model's spec. No chunk is read yet, except the positions chunk of a
// packet stored pruned (its index map; a bad one is ErrCorruption): such a
// packet places its k kept rows per (layer, KV head), see
// assemble_prune.go.
func (db *DB) PrepareAssemble(ns string, model format.Fingerprint, items []AssembleItem) (*Assembly, error) {
	return db.prepareAssemble(ns, model, items, nil)
}

// prepareAssemble is PrepareAssemble with optional keep-sets, one per item
// (nil, or a nil entry: the item is not pruned).
func (db *DB) prepareAssemble(ns string, model format.Fingerprint, items []AssembleItem, keep []*prune.Set) (*Assembly, error) {
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: assemble: no packets", ErrInvalidArgument)
	}
	a := &Assembly{}
	ok := false
	defer func() {
		if !ok {
			a.Release()
		}
	}()
	for i, it := range items {
		var k *prune.Set
		if keep != nil {
			k = keep[i]
		}
		p, err := a.add(db, ns, model, it, k)
		if err != nil {
			return nil, fmt.Errorf("assemble: item %d (packet %s): %w", i, it.ID.Short(), err)
		}
		a.packets = append(a.packets, p)
	}
	spec, err := db.Model(model)
	if err != nil {
		return nil, fmt.Errorf("assemble: %w", err)
	}
	a.spec = *spec
	for i := range a.packets {
		if err := a.checkHeader(a.packets[i].v.Header()); err != nil {
			return nil, err
		}
	}
	if a.rope, err = reconstruct.NewRoPE(spec.RoPE, spec.HeadDim); err != nil {
		return nil, fmt.Errorf("assemble: model %s: %w", model.Short(), err)
	}
	for i := range a.packets {
		if p := &a.packets[i]; p.Offset != 0 {
			if p.shift, err = reconstruct.NewShifter(a.rope, p.Offset); err != nil {
				return nil, fmt.Errorf("assemble: %w", err)
			}
		}
	}
	ok = true
	return a, nil
}

// add gets item it's view and places its rows after those added before.
func (a *Assembly) add(db *DB, ns string, model format.Fingerprint, it AssembleItem, keep *prune.Set) (assemblePacket, error) {
	if it.Offset < 0 {
		return assemblePacket{}, fmt.Errorf("%w: negative offset %d", ErrInvalidArgument, it.Offset)
	}
	v, err := db.Get(ns, model, it.ID)
	if err != nil {
		return assemblePacket{}, err
	}
	h := v.Header()
	sel, err := selectRows(v, keep)
	if err != nil {
		v.Release()
		return assemblePacket{}, err
	}
	n := sel.rows
	if it.Offset > math.MaxInt64-int64(n) || a.tokens > math.MaxInt32-n {
		v.Release()
		return assemblePacket{}, fmt.Errorf("%w: offset %d + %d rows (after %d rows) out of range", ErrInvalidArgument, it.Offset, n, a.tokens)
	}
	p := assemblePacket{v: v, src: sel.src, AssembledPacket: AssembledPacket{
		ID: it.ID, Offset: it.Offset, Row: a.tokens, Tokens: n,
		HeaderTokens: int(h.HeaderTokens), TrailerTokens: int(h.TrailerTokens), Keep: sel.keep,
	}}
	a.tokens += n
	return p, nil
}

// checkHeader refuses a header whose layout differs from the model spec its
// fingerprint names.
func (a *Assembly) checkHeader(h *format.PacketHeader) error {
	m := &a.spec
	if int(h.Layers) != m.Layers || int(h.KVHeads) != m.KVHeads || int(h.HeadDim) != m.HeadDim || h.DType != m.DType {
		return fmt.Errorf("%w: assemble: packet %s is %d layers x %d kv heads x %d dims of %v, its model spec %d x %d x %d of %v",
			ErrCorruption, h.ID.Short(), h.Layers, h.KVHeads, h.HeadDim, h.DType, m.Layers, m.KVHeads, m.HeadDim, m.DType)
	}
	return nil
}

// Tokens is the number of rows the destination receives: the sum of the
// packets' rows.
func (a *Assembly) Tokens() int { return a.tokens }

// Spec is the model spec the packets were stored for.
func (a *Assembly) Spec() format.ModelSpec { return a.spec }

// Packets says where each item's rows go, in item order.
func (a *Assembly) Packets() []AssembledPacket {
	out := make([]AssembledPacket, len(a.packets))
	for i, p := range a.packets {
		out[i] = p.AssembledPacket
	}
	return out
}

// Release drops the views. It is idempotent; Run then returns ErrClosed.
func (a *Assembly) Release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.released {
		return
	}
	a.released = true
	for _, p := range a.packets {
		p.v.Release()
	}
}

// Run fills dst (see Assemble) and returns when every layer is complete
// and reported, or at the first error.
func (a *Assembly) Run(dst *Dest, o *AssembleOptions) error {
	if o == nil {
		o = &AssembleOptions{}
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.released {
		return fmt.Errorf("%w: assemble: assembly was released", ErrClosed)
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
	workers := o.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	r := &assembleRun{a: a, dst: dst, g: g, items: 2 * len(a.packets) * a.spec.Layers}
	r.left = make([]atomic.Int32, a.spec.Layers)
	for l := range r.left {
		r.left[l].Store(int32(2 * len(a.packets)))
	}
	r.done = make(chan int, a.spec.Layers)
	return r.run(min(workers, r.items), o.OnLayer)
}

// assembleRun is one Run: work items (layer, packet, K|V) taken in layer
// order by workers, and per-layer countdowns that report complete layers.
type assembleRun struct {
	a     *Assembly
	dst   *Dest
	g     *destGeom
	items int
	next  atomic.Int64
	left  []atomic.Int32 // per layer: items not yet done
	done  chan int       // layers whose items are all done, in any order

	stop    atomic.Bool
	errOnce sync.Once
	err     error
}

// run starts the workers and reports layers in order as they complete.
func (r *assembleRun) run(workers int, onLayer func(int) error) error {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work()
		}()
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
func (r *assembleRun) fail(err error) {
	r.errOnce.Do(func() { r.err = err })
	r.stop.Store(true)
}

// work takes items until none is left or the run stops.
func (r *assembleRun) work() {
	var w assembleWorker
	per := 2 * len(r.a.packets)
	for !r.stop.Load() {
		i := int(r.next.Add(1) - 1)
		if i >= r.items {
			return
		}
		l, p, key := i/per, i%per/2, i%2 == 0
		dst := r.dst.V[l]
		if key {
			dst = r.dst.K[l]
		}
		pk := &r.a.packets[p]
		if err := pk.v.file.Guard(func() error { return r.a.fill(&w, r.g, dst, pk, l, key) }); err != nil {
			r.fail(err)
			return
		}
		if r.left[l].Add(-1) == 0 {
			r.done <- l
		}
	}
}
