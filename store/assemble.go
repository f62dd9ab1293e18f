package store

import (
	"context"
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store/internal/assemble"
	"github.com/kvstore/kvstore/store/internal/view"
)

// Assemble is KV Packet's recompute-free read: it concatenates the stored
// packets named by items, in item order, into dst, re-rotating each
// packet's keys from their stored local positions 0..n-1 to Offset..Offset+n-1
// (reconstruct.Shift by delta = Offset, which may be negative: see
// AssembleItem) and copying its values unchanged.
// Every row a packet holds is placed, its adapter header and trailer rows
// included, so item i's rows are the destination's tokens
// [Row, Row+Tokens) (see Assembly.Packets). A packet stored pruned holds
// k rows per (layer, KV head), each key rotated from its kept position t
// to Offset+t; Assembly.Positions gives their positions (assemble_prune.go).
//
// Offsets are the caller's choice. The usual one is consecutive (each item
// starting where the previous ended, as a server appending retrieved
// documents does), but any offsets are accepted that leave every
// position >= 0, overlapping or out of
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
// same pass where they are copied); on a file system without mmap, on a
// chunk's first read since Open (of an extent up to 16 MiB) and always
// for an extent up to 2 MiB, they are read through bounded scratch
// instead, their CRC computed on the way, sparing a fresh mapping's page
// faults (view.Source.Raw). Keys are rotated straight into their place,
// in a paged destination too. Besides dst it uses, per worker, one
// scratch buffer of 256 KiB (or of one token's rows across all KV heads,
// if larger; kept between calls) when chunks are read, and small per-call
// tables: nothing proportional to the packets' size.
//
// Errors: a packet absent from ns is ErrNotFound, one stored for another
// model ErrModelMismatch (nothing is read from it), a chunk whose bytes fail
// their CRC32C ErrCorruption (a *ChunkError saying where), a bad item or
// destination ErrInvalidArgument. On error dst's contents are unspecified
// (layers already reported through OnLayer stay valid).
//
// Assemble is PrepareAssemble, Assembly.Run and Assembly.Release; use them
// separately to learn the total tokens before allocating dst, or
// AssembleInto to have the destination allocated.
func (db *DB) Assemble(ctx context.Context, ns string, model format.Fingerprint, items []AssembleItem, dst *Dest, o *AssembleOptions) error {
	defer db.st.assembleTimer(len(items))()
	a, err := db.PrepareAssemble(ctx, ns, model, items)
	if err != nil {
		return err
	}
	defer a.Release()
	return a.Run(ctx, dst, o)
}

// AssembleInto is Assemble into a destination it allocates (NewDest) of
// shape s, sized for the items' rows, and returned; the layout's paged
// block table is then 0, 1, .... Errors are Assemble's and NewDest's.
func (db *DB) AssembleInto(ctx context.Context, ns string, model format.Fingerprint, items []AssembleItem, s DestShape, o *AssembleOptions) (*Dest, error) {
	defer db.st.assembleTimer(len(items))()
	a, err := db.PrepareAssemble(ctx, ns, model, items)
	if err != nil {
		return nil, err
	}
	defer a.Release()
	d, err := a.in.RunInto(ctx, assemble.Shape(s), toAssembleOptions(o))
	return fromDest(d), chunkError(err)
}

// AssembleItem is one packet of an assembly: its id and the position
// delta of its keys. Keys are stored at local positions 0..n-1 (a pruned
// packet's kept rows at their original local positions), so Offset is the
// absolute position its first row (its first adapter header row, if any)
// takes, and a row at local position t goes to Offset+t.
//
// Offset may be negative (a packet moved earlier, as llama.cpp's seq_add
// allows) as long as every resulting position is >= 0: that is possible
// for a pruned item (a keep-set given, or a packet stored pruned) whose
// first kept position, over every (layer, KV head), is at least -Offset.
// An Offset that puts any placed row below position 0 is
// ErrInvalidArgument.
type AssembleItem struct {
	ID     format.PacketID
	Offset int64
}

// AssembledPacket says where an item's rows go.
type AssembledPacket struct {
	// ID is the item's packet.
	ID format.PacketID
	// Offset is the position of the packet's first row.
	Offset int64
	// Row is the index of its first row among the destination's tokens.
	Row int
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

// fromAssembledPacket is assemble's packet as the store's (the same
// fields).
func fromAssembledPacket(p assemble.Packet) AssembledPacket { return AssembledPacket(p) }

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
	// GOMAXPROCS, fewer for a small assembly (one per 512 KiB placed; one
	// worker fills on the calling goroutine).
	Workers int
}

// toAssembleOptions is o as assemble's (the same fields); nil stays nil.
func toAssembleOptions(o *AssembleOptions) *assemble.Options { return (*assemble.Options)(o) }

// Assembly is a prepared Assemble: the packets' views are held and their
// headers checked, so the total rows are known before a destination is
// allocated. Run may be called any number of times, concurrently too (into
// distinct destinations). Release it when done; it is safe for concurrent
// use.
type Assembly struct {
	in *assemble.Held
}

// PrepareAssemble looks up every item's packet in namespace ns for model
// and returns an Assembly holding their views. Errors are those of Get
// (ErrNotFound, ErrModelMismatch), ErrInvalidArgument for no items or an
// offset that puts a row at a negative position, and ErrCorruption for a
// header that does not match the model's spec. No chunk is read yet,
// except the positions chunk of a packet stored pruned (its index map; a
// bad one is ErrCorruption): such a packet places its k kept rows per
// (layer, KV head), see assemble_prune.go.
func (db *DB) PrepareAssemble(ctx context.Context, ns string, model format.Fingerprint, items []AssembleItem) (*Assembly, error) {
	return db.prepareAssemble(ctx, ns, model, items, nil)
}

// prepareAssemble is PrepareAssemble with optional keep-sets, one per item
// (nil, or a nil entry: the item is not pruned).
func (db *DB) prepareAssemble(ctx context.Context, ns string, model format.Fingerprint, items []AssembleItem, keep []*prune.Set) (*Assembly, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("assemble: %w", err)
	}
	in, err := assemble.Open(len(items), func(i int) (assemble.Item, func(), error) {
		v, err := db.Get(ctx, ns, model, items[i].ID)
		if err != nil {
			return assemble.Item{}, nil, fmt.Errorf("assemble: item %d (packet %s): %w", i, items[i].ID.Short(), err)
		}
		it := assemble.Item{Src: view.SourceOf(v.in), Offset: items[i].Offset}
		if keep != nil {
			it.Keep = keep[i]
		}
		return it, v.Release, nil
	}, func() (*format.ModelSpec, error) { return db.Model(model) }, ErrClosed)
	if err != nil {
		return nil, chunkError(err)
	}
	return &Assembly{in: in}, nil
}

// Tokens is the number of rows the destination receives: the sum of the
// packets' rows.
func (a *Assembly) Tokens() int { return a.in.Tokens() }

// Spec is the model spec the packets were stored for.
func (a *Assembly) Spec() format.ModelSpec { return a.in.Spec() }

// Packets says where each item's rows go, in item order.
func (a *Assembly) Packets() []AssembledPacket { return mapSlice(a.in.Packets(), fromAssembledPacket) }

// Release drops the views. It is idempotent; Run then returns ErrClosed.
func (a *Assembly) Release() { a.in.Release() }

// Run fills dst (see Assemble) and returns when every layer is complete
// and reported, or at the first error.
func (a *Assembly) Run(ctx context.Context, dst *Dest, o *AssembleOptions) error {
	return chunkError(a.in.Run(ctx, toDest(dst), toAssembleOptions(o)))
}
