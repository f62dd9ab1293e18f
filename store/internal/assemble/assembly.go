package assemble

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/reconstruct"
)

// Source is one stored packet's chunks, opened and pinned by the caller
// (the store's View). Chunk i is layer i/2's keys when i is even, its
// values when odd, [kv_heads][rows][head_dim] once decoded.
type Source interface {
	// Header is the packet's header; it is not modified.
	Header() *format.PacketHeader
	// Raw returns raw chunk i's bytes when they are mapped (nil when they
	// must be read with ReadAt), unverified, and whether the caller must
	// check them (Checked) because they were not verified before.
	Raw(i int) (mapped []byte, check bool, err error)
	// ReadAt reads the file bytes at off (a chunk's offset and more).
	ReadAt(b []byte, off uint64) error
	// Checked compares crc, computed over raw chunk i as it was placed,
	// with the header's (a *bloblog.ChunkError wrapping ErrCorruption when
	// they differ) and counts the read.
	Checked(i int, crc uint32, mapped bool) error
	// Counted counts chunk i's read when Raw said it needs no check.
	Counted(i int)
	// Chunk returns chunk i's stored bytes, verified.
	Chunk(i int) ([]byte, error)
	// Decode decodes chunk i's stored bytes b (from Chunk) into dst, its
	// RawLength bytes; bytes that do not decode are ErrCorruption.
	Decode(i int, b, dst []byte) error
	// Keep is a pruned packet's stored keep-set, nil for a whole packet.
	Keep() (*prune.Set, error)
	// Guard runs f, which reads the source's mapped bytes, turning a fault
	// on them (a file truncated under its mapping, a failed page read)
	// into an error instead of SIGBUS (bloblog.File.Guard).
	Guard(f func() error) error
}

// Item is one packet of an assembly: its source, the position delta of its
// keys (Offset: a stored row at local position t goes to position
// Offset+t) and an optional keep-set selecting its rows.
type Item struct {
	Src    Source
	Offset int64
	Keep   *prune.Set
}

// Packet says where an item's rows go.
type Packet struct {
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

// Assembly is a prepared assembly: the packets' headers checked and their
// rows decided, so the total rows are known before a destination is
// allocated. Run may be called any number of times, concurrently too (into
// distinct destinations), while the sources stay open.
type Assembly struct {
	spec    format.ModelSpec
	rope    *reconstruct.RoPE
	packets []packet
	tokens  int
}

type packet struct {
	Packet
	src   Source
	h     *format.PacketHeader
	shift *reconstruct.Shifter // rotates keys by Offset; nil when Offset is 0
	// sel, when not nil, selects rows while placing (fillPruned): per
	// (layer, KV head), the indexes of the stored rows to place, in order.
	// nil: every stored row is placed, as stored.
	sel [][]int32
}

// Prepare checks every item's packet against spec and decides its rows.
// Errors: ErrCorruption for a header that does not match spec or a bad
// stored positions chunk; ErrInvalidArgument for a keep-set that does not
// fit, or an Offset that puts a placed row at a negative position or past
// the int64 positions, or more than 2^31-1 rows in all.
func Prepare(spec *format.ModelSpec, items []Item) (*Assembly, error) {
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: assemble: no packets", ErrInvalidArgument)
	}
	a := &Assembly{spec: *spec}
	for i, it := range items {
		h := it.Src.Header()
		if err := a.checkHeader(h); err != nil {
			return nil, err
		}
		p, err := a.add(it)
		if err != nil {
			return nil, fmt.Errorf("assemble: item %d (packet %s): %w", i, h.ID.Short(), err)
		}
		a.packets = append(a.packets, p)
	}
	var err error
	if a.rope, err = reconstruct.NewRoPE(spec.RoPE, spec.HeadDim); err != nil {
		return nil, fmt.Errorf("assemble: model %s: %w", spec.Fingerprint().Short(), err)
	}
	for i := range a.packets {
		if p := &a.packets[i]; p.Offset != 0 {
			if p.shift, err = reconstruct.NewShifter(a.rope, p.Offset); err != nil {
				return nil, fmt.Errorf("assemble: %w", err)
			}
		}
	}
	if err := a.checkDynamicRoPE(); err != nil {
		return nil, err
	}
	return a, nil
}

// checkDynamicRoPE refuses an assembly that dynamic NTK scaling would
// rotate with other frequencies than its packets were prefilled with: a
// sequence longer than original_max_position_embeddings (M) uses the base
// of its own length (reconstruct.RoPE.AtLength), so its keys are a
// re-rotation (reconstruct.ReRotate), not the shift Run applies.
// Up to M positions the shift is exact. Rather than a silent wrong key,
// ErrInvalidArgument (docs/decisions.md, RoPE variants). The sequence's
// end is each packet's Offset plus its stored header's Tokens.
func (a *Assembly) checkDynamicRoPE() error {
	if a.spec.RoPE.Scaling != format.RoPEScalingDynamic {
		return nil
	}
	var end int64
	for _, p := range a.packets {
		end = max(end, p.Offset+int64(p.h.Tokens))
	}
	if m := int64(a.spec.RoPE.OriginalMaxPos); end > m {
		return fmt.Errorf("%w: assemble: dynamic NTK RoPE: the assembled sequence reaches position %d, past original_max_position_embeddings %d; "+
			"re-rotating packets to the longer sequence's frequencies is not supported", ErrInvalidArgument, end, m)
	}
	return nil
}

// add decides item it's rows and places them after those added before.
func (a *Assembly) add(it Item) (packet, error) {
	h := it.Src.Header()
	sel, err := selectRows(it.Src, it.Keep)
	if err != nil {
		return packet{}, err
	}
	if err := checkPositions(it.Offset, sel.keep); err != nil {
		return packet{}, err
	}
	n := sel.rows
	if it.Offset > math.MaxInt64-int64(n) || a.tokens > math.MaxInt32-n {
		return packet{}, fmt.Errorf("%w: offset %d + %d rows (after %d rows) out of range", ErrInvalidArgument, it.Offset, n, a.tokens)
	}
	p := packet{src: it.Src, h: h, sel: sel.src, Packet: Packet{
		ID: h.ID, Offset: it.Offset, Row: a.tokens, Tokens: n,
		HeaderTokens: int(h.HeaderTokens), TrailerTokens: int(h.TrailerTokens), Keep: sel.keep,
	}}
	a.tokens += n
	return p, nil
}

// checkPositions refuses an offset that puts a placed row at a negative
// position: rows are placed at offset + their local positions, 0, 1, ...
// for a whole packet, the kept ones (keep) for a pruned one, so a negative
// offset (a packet moved earlier) is accepted when no placed row has a
// local position below -offset.
func checkPositions(offset int64, keep *prune.Set) error {
	if offset >= 0 {
		return nil
	}
	first := int64(0) // a whole packet's first row
	if keep != nil {
		first = math.MaxInt64
		for _, kept := range keep.Keep {
			if len(kept) > 0 {
				first = min(first, int64(kept[0]))
			}
		}
	}
	if first == math.MaxInt64 || offset+first >= 0 {
		return nil
	}
	return fmt.Errorf("%w: offset %d puts local position %d at position %d, below 0", ErrInvalidArgument, offset, first, offset+first)
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
func (a *Assembly) Packets() []Packet {
	out := make([]Packet, len(a.packets))
	for i, p := range a.packets {
		out[i] = p.Packet
	}
	return out
}

// Positions is the index map of (layer, KV head): the absolute position of
// each of the destination's Tokens() rows of that head, in row order.
// Without keep-sets it is each item's Offset, Offset+1, ...; a pruned
// item's rows (a keep-set given, or a packet stored pruned) have Offset +
// their kept local positions.
func (a *Assembly) Positions(layer, head int) ([]int64, error) {
	if layer < 0 || layer >= a.spec.Layers || head < 0 || head >= a.spec.KVHeads {
		return nil, fmt.Errorf("%w: positions of layer %d head %d of a %d x %d model", ErrInvalidArgument, layer, head, a.spec.Layers, a.spec.KVHeads)
	}
	out := make([]int64, 0, a.tokens)
	for _, p := range a.packets {
		if p.Keep == nil {
			for j := range p.Tokens {
				out = append(out, p.Offset+int64(j))
			}
			continue
		}
		for _, t := range p.Keep.Kept(layer, head) {
			out = append(out, p.Offset+int64(t))
		}
	}
	return out, nil
}
