package store

import (
	"fmt"

	"github.com/kvstore/kvstore/reconstruct"
)

// normalized returns p when its keys are already at local positions
// 0..n-1 (BasePosition 0). Otherwise it returns a copy of p whose keys are
// rotated by -BasePosition (reconstruct.Shift) into new buffers, so that
// they are stored at 0..n-1 like every packet's; p's buffers are only read.
// The copy keeps BasePosition, which the header records. Values do not
// depend on position and are shared with p. A compacted (pruned) packet's
// kept keys all move by the same -BasePosition, whatever their positions.
//
// The rotation is exact up to the dtype's rounding (reconstruct.Shift
// states the bounds): Put at base s followed by Assemble at offset s gives
// back the caller's keys within twice that.
func (p *Packet) normalized() (*Packet, error) {
	if p.BasePosition == 0 {
		return p, nil
	}
	m := p.Model
	r, err := reconstruct.NewRoPE(m.RoPE, m.HeadDim)
	if err != nil {
		return nil, fmt.Errorf("packet: normalise keys: %w", err)
	}
	q := *p
	q.Layers = make([]Layer, len(p.Layers))
	n := len(p.Layers[0].K)
	keys := make([]byte, n*len(p.Layers))
	for l, layer := range p.Layers {
		k := keys[l*n : (l+1)*n : (l+1)*n]
		if err := reconstruct.Shift(k, layer.K, m.DType, r, m.KVHeads, p.rows(), -int64(p.BasePosition)); err != nil {
			return nil, fmt.Errorf("packet: normalise layer %d keys from base %d: %w", l, p.BasePosition, err)
		}
		q.Layers[l] = Layer{K: k, V: layer.V}
	}
	return &q, nil
}
