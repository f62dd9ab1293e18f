package llama

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// Cache is the attention state of a sequence: for every layer the keys and
// values of each cached token, and each token's absolute position. Rows need
// not sit at contiguous positions: a cache assembled from packets holds
// whatever rows and positions the caller put in it. Forward appends to it.
type Cache struct {
	KVHeads, HeadDim int
	Layers           []LayerKV
	// Positions[t] is the absolute position row t was rotated for.
	Positions []int64
}

// LayerKV holds one layer's rows, each laid out [KVHeads][tokens][HeadDim]
// as kvstore stores them. K is post-RoPE (what attention uses); KPre is the
// same keys before RoPE, or empty when the cache's producer did not keep
// them (Forward then keeps it empty).
type LayerKV struct {
	K, KPre, V []float32
}

// NewCache returns an empty cache shaped for m.
func (m *Model) NewCache() *Cache {
	return &Cache{KVHeads: m.KVHeads, HeadDim: m.HeadDim(), Layers: make([]LayerKV, m.Layers)}
}

// Len is the number of cached tokens.
func (c *Cache) Len() int { return len(c.Positions) }

// Clone returns a deep copy.
func (c *Cache) Clone() *Cache {
	d := &Cache{KVHeads: c.KVHeads, HeadDim: c.HeadDim, Layers: make([]LayerKV, len(c.Layers)),
		Positions: append([]int64(nil), c.Positions...)}
	for l, kv := range c.Layers {
		d.Layers[l] = LayerKV{K: clone(kv.K), KPre: clone(kv.KPre), V: clone(kv.V)}
	}
	return d
}

func clone(x []float32) []float32 {
	if x == nil {
		return nil
	}
	return append([]float32{}, x...)
}

// check verifies that every layer holds Len() rows of the cache's shape.
func (c *Cache) check(layers, kvHeads, headDim int) error {
	bad := func(msg string, args ...any) error {
		return fmt.Errorf("%w: llama: cache: %s", format.ErrInvalidArgument, fmt.Sprintf(msg, args...))
	}
	if c.KVHeads != kvHeads || c.HeadDim != headDim || len(c.Layers) != layers {
		return bad("%d layers x %d kv heads x %d dims, model has %d x %d x %d",
			len(c.Layers), c.KVHeads, c.HeadDim, layers, kvHeads, headDim)
	}
	n := c.Len() * kvHeads * headDim
	for l, kv := range c.Layers {
		if len(kv.K) != n || len(kv.V) != n || (len(kv.KPre) != n && len(kv.KPre) != 0) {
			return bad("layer %d has %d K, %d KPre, %d V floats for %d tokens", l, len(kv.K), len(kv.KPre), len(kv.V), c.Len())
		}
	}
	return nil
}

// Shift re-rotates every layer's keys by delta positions with
// reconstruct.ShiftF32 and moves Positions by delta, as an Assemble of a
// stored packet would. KPre and V are unchanged.
func (c *Cache) Shift(r *reconstruct.RoPE, delta int64) error {
	if err := c.check(len(c.Layers), c.KVHeads, r.HeadDim()); err != nil {
		return err
	}
	for _, kv := range c.Layers {
		if err := reconstruct.ShiftF32(kv.K, kv.K, r, c.KVHeads, c.Len(), delta); err != nil {
			return fmt.Errorf("llama: cache shift: %w", err)
		}
	}
	for i := range c.Positions {
		c.Positions[i] += delta
	}
	return nil
}

// Append adds o's rows after c's, layer by layer: the concatenation an
// Assemble of several packets produces. KPre is kept only if both have it.
func (c *Cache) Append(o *Cache) error {
	if err := c.check(len(c.Layers), c.KVHeads, c.HeadDim); err != nil {
		return err
	}
	if err := o.check(len(c.Layers), c.KVHeads, c.HeadDim); err != nil {
		return fmt.Errorf("appending: %w", err)
	}
	pre := true
	for l := range c.Layers {
		pre = pre && (len(c.Layers[l].KPre) != 0 || c.Len() == 0) && (len(o.Layers[l].KPre) != 0 || o.Len() == 0)
	}
	for l := range c.Layers {
		a, b := &c.Layers[l], &o.Layers[l]
		a.K = appendRows(a.K, b.K, c.KVHeads, c.Len(), o.Len(), c.HeadDim)
		a.V = appendRows(a.V, b.V, c.KVHeads, c.Len(), o.Len(), c.HeadDim)
		if pre {
			a.KPre = appendRows(a.KPre, b.KPre, c.KVHeads, c.Len(), o.Len(), c.HeadDim)
		} else {
			a.KPre = nil
		}
	}
	c.Positions = append(c.Positions, o.Positions...)
	return nil
}

// appendRows concatenates [heads][n][hd] and [heads][m][hd] along tokens.
func appendRows(x, y []float32, heads, n, m, hd int) []float32 {
	out := make([]float32, heads*(n+m)*hd)
	for h := range heads {
		copy(out[h*(n+m)*hd:], x[h*n*hd:(h+1)*n*hd])
		copy(out[(h*(n+m)+n)*hd:], y[h*m*hd:(h+1)*m*hd])
	}
	return out
}

// Slice returns a copy of rows [lo, hi) of c (KPre included when c has
// it), with their positions: a packet stripped of rows it does not keep,
// such as an adapter's hidden header. It panics on a range outside
// [0, Len()], as slicing does.
func (c *Cache) Slice(lo, hi int) *Cache {
	if lo < 0 || hi < lo || hi > c.Len() {
		panic(fmt.Sprintf("llama: cache rows [%d, %d) of %d", lo, hi, c.Len()))
	}
	out := &Cache{KVHeads: c.KVHeads, HeadDim: c.HeadDim, Layers: make([]LayerKV, len(c.Layers)),
		Positions: append([]int64{}, c.Positions[lo:hi]...)}
	n, hd := c.Len(), c.HeadDim
	part := func(x []float32) []float32 {
		if len(x) == 0 {
			return nil
		}
		y := make([]float32, 0, c.KVHeads*(hi-lo)*hd)
		for h := range c.KVHeads {
			y = append(y, x[(h*n+lo)*hd:(h*n+hi)*hd]...)
		}
		return y
	}
	for l, kv := range c.Layers {
		out.Layers[l] = LayerKV{K: part(kv.K), KPre: part(kv.KPre), V: part(kv.V)}
	}
	return out
}
