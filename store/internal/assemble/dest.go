package assemble

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/kvstore/kvstore/format"
)

// Dest is caller-owned memory that Assemble fills: K[l] and V[l] are layer
// l's keys and values in the model's storage dtype, little endian, laid out
// as Layout says (see the package comment for each layout's index
// formula).
//
// Contiguous (format.KVLayoutHND): each buffer is exactly
// kv_heads*tokens*head_dim elements. Paged (format.KVLayoutPagedNHD): each
// buffer is a whole number of blocks of BlockSize*kv_heads*head_dim
// elements (the pool of one layer), BlockTable has at least
// ceil(tokens/BlockSize) entries, and those entries are distinct blocks
// present in every buffer. Slots of a block past the last token, and
// blocks the table does not name, are not written. Transposed V
// (format.KVLayoutTransposedV): each buffer is exactly
// kv_heads*tokens*head_dim elements.
//
// No two buffers may overlap. Assemble checks all of this up front and
// writes nothing when a check fails (ErrInvalidArgument).
type Dest struct {
	Layout     format.KVLayout
	K, V       [][]byte
	BlockSize  int     // paged only
	BlockTable []int32 // paged only
}

// geom is a checked Dest's geometry: where each row goes.
type geom struct {
	layout   format.KVLayout
	heads    int
	tokens   int
	rowBytes int
	esize    int // bytes of one element
	// Paged (and a transposed layout's K, one block of tokens slots): row
	// (h, t) is at table[t/bs]*block + (t%bs)*slot + h*head.
	bs                int
	table             []int32
	block, slot, head int
	// stream: raw rows copied or rotated from a mapping are stored with
	// non-temporal hints (the run writes at least streamMin bytes;
	// fill.go).
	stream bool
}

// offset is the byte offset of (head h, token t) in a layer buffer (a K
// buffer for format.KVLayoutTransposedV).
func (g *geom) offset(h, t int) int {
	if g.layout == format.KVLayoutHND {
		return (h*g.tokens + t) * g.rowBytes
	}
	return int(g.table[t/g.bs])*g.block + t%g.bs*g.slot + h*g.head
}

// nhd sets g's paged strides to [block][slot][head][dim] with bs slots.
func (g *geom) nhd(bs int) {
	g.bs, g.slot, g.head = bs, g.heads*g.rowBytes, g.rowBytes
	g.block = bs * g.slot
}

// check validates d for tokens rows of model m and returns its geometry.
func (d *Dest) check(m *format.ModelSpec, tokens int) (*geom, error) {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: assemble: %v destination: %s", ErrInvalidArgument, d.Layout, fmt.Sprintf(f, args...))
	}
	if len(d.K) != m.Layers || len(d.V) != m.Layers {
		return nil, bad("%d K and %d V buffers for %d layers", len(d.K), len(d.V), m.Layers)
	}
	g := &geom{layout: d.Layout, heads: m.KVHeads, tokens: tokens, rowBytes: m.HeadDim * m.DType.Size(), esize: m.DType.Size()}
	var err error
	switch d.Layout {
	case format.KVLayoutHND:
		err = d.checkContiguous(g, bad)
	case format.KVLayoutPagedNHD:
		err = d.checkPaged(g, bad)
	case format.KVLayoutTransposedV:
		// K is one block of tokens slots; V is placed by fillTransposed.
		if err = d.checkContiguous(g, bad); err == nil {
			g.nhd(max(tokens, 1))
			g.table = []int32{0}
		}
	case format.KVLayoutPagedKV, format.KVLayoutPagedPacked:
		if err := d.checkPooled(g, bad); err != nil {
			return nil, err
		}
		return g, nil // K and V share each pool: checkPooled checked the pools

	default:
		err = bad("unknown layout")
	}
	if err != nil {
		return nil, err
	}
	if err := checkDisjoint(d.K, d.V); err != nil {
		return nil, bad("%v", err)
	}
	return g, nil
}

type badFunc func(f string, args ...any) error

func (d *Dest) checkContiguous(g *geom, bad badFunc) error {
	head := g.heads * g.rowBytes // bytes of one token across heads
	if g.tokens > math.MaxInt/head {
		return bad("%d tokens of %d bytes overflow", g.tokens, head)
	}
	n := g.tokens * head
	for l := range d.K {
		if len(d.K[l]) != n || len(d.V[l]) != n {
			return bad("layer %d: K %d bytes, V %d bytes, want %d (%d kv heads x %d tokens x %d-byte rows)",
				l, len(d.K[l]), len(d.V[l]), n, g.heads, g.tokens, g.rowBytes)
		}
	}
	return nil
}

func (d *Dest) checkPaged(g *geom, bad badFunc) error {
	if d.BlockSize <= 0 || d.BlockSize > math.MaxInt/(g.heads*g.rowBytes) {
		return bad("block size %d", d.BlockSize)
	}
	g.nhd(d.BlockSize)
	block := g.block
	blocks := math.MaxInt
	for l := range d.K {
		for _, b := range [][]byte{d.K[l], d.V[l]} {
			if len(b)%block != 0 {
				return bad("layer %d: buffer of %d bytes is not a whole number of %d-byte blocks", l, len(b), block)
			}
			blocks = min(blocks, len(b)/block)
		}
	}
	return d.checkTable(g, blocks, bad)
}

// checkTable accepts a block table naming, for tokens, distinct blocks
// among the buffers' blocks.
func (d *Dest) checkTable(g *geom, blocks int, bad badFunc) error {
	need := (g.tokens + d.BlockSize - 1) / d.BlockSize
	if len(d.BlockTable) < need {
		return bad("block table of %d entries, %d tokens need %d", len(d.BlockTable), g.tokens, need)
	}
	used := slices.Clone(d.BlockTable[:need])
	for i, b := range used {
		if b < 0 || int(b) >= blocks {
			return bad("block table entry %d is block %d, buffers hold %d blocks", i, b, blocks)
		}
	}
	slices.Sort(used)
	for i := 1; i < len(used); i++ {
		if used[i] == used[i-1] {
			return bad("block %d appears twice in the block table", used[i])
		}
	}
	g.table = d.BlockTable
	return nil
}

// checkDisjoint refuses buffers that share memory: workers write them
// concurrently.
func checkDisjoint(sets ...[][]byte) error {
	type span struct{ lo, hi uintptr }
	var spans []span
	for _, bufs := range sets {
		for _, b := range bufs {
			if len(b) > 0 {
				lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
				spans = append(spans, span{lo, lo + uintptr(len(b))})
			}
		}
	}
	slices.SortFunc(spans, func(a, b span) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	for i := 1; i < len(spans); i++ {
		if spans[i].lo < spans[i-1].hi {
			return fmt.Errorf("two K/V buffers overlap")
		}
	}
	return nil
}
