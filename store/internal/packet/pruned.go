package packet

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
)

// KeptRows checks d's keep-set against d (its model is valid) and returns
// the rows it keeps per (layer, KV head): Tokens when it has none.
func (d *Desc) KeptRows() (int, error) {
	k := d.Keep
	if k == nil {
		return d.Tokens(), nil
	}
	if err := k.Validate(); err != nil {
		return 0, fmt.Errorf("packet: %w", err) // wraps ErrInvalidArgument
	}
	m := d.Model
	if k.Layers != m.Layers || k.KVHeads != m.KVHeads || k.Tokens != d.Tokens() {
		return 0, fmt.Errorf("%w: packet: keep-set for %d layers x %d heads x %d tokens, packet is %d x %d x %d",
			ErrInvalidArgument, k.Layers, k.KVHeads, k.Tokens, m.Layers, m.KVHeads, d.Tokens())
	}
	n, ok := k.Rows()
	if !ok {
		return 0, fmt.Errorf("%w: packet: keep-set keeps different numbers of rows per (layer, head)", ErrInvalidArgument)
	}
	return n, nil
}

// Compacted returns d itself when it is stored whole (no keep-set, or one
// keeping every row), else a copy whose layers hold only the kept rows,
// gathered into new buffers, with its positions chunk (the package
// comment, Pruned packets). d was checked.
func (d *Desc) Compacted() *Desc {
	k, _ := d.KeptRows()
	n := d.Tokens()
	if d.Keep == nil || k == n {
		return d
	}
	m := d.Model
	rb := m.HeadDim * m.DType.Size()
	q := *d
	q.Kept = k
	q.Layers = make([]Layer, len(d.Layers))
	size := m.KVHeads * k * rb
	buf := make([]byte, 2*len(d.Layers)*size)
	for l, layer := range d.Layers {
		kk, vv := buf[2*l*size:(2*l+1)*size:(2*l+1)*size], buf[(2*l+1)*size:(2*l+2)*size:(2*l+2)*size]
		for h := range m.KVHeads {
			for j, t := range d.Keep.Kept(l, h) {
				src, dst := (h*n+int(t))*rb, (h*k+j)*rb
				copy(kk[dst:dst+rb], layer.K[src:src+rb])
				copy(vv[dst:dst+rb], layer.V[src:src+rb])
			}
		}
		q.Layers[l] = Layer{K: kk, V: vv}
	}
	q.Positions = EncodePositions(d.Keep)
	return &q
}

// EncodePositions is the positions chunk of keep-set s (checked), drawn
// in format/positions.go.
func EncodePositions(s *prune.Set) []byte { return format.AppendPositions(nil, s.Tokens, s.Keep) }
