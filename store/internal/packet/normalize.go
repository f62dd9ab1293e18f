package packet

import (
	"fmt"

	"github.com/kvstore/kvstore/reconstruct"
)

// Normalized returns d when its keys are already at local positions
// 0..n-1 (BasePosition 0). Otherwise it returns a copy of d whose keys are
// rotated by -BasePosition (reconstruct.Shift) into new buffers, so that
// they are stored at 0..n-1 like every packet's; d's buffers are only read.
// The copy keeps BasePosition, which the header records. Values do not
// depend on position and are shared with d. A compacted (pruned) packet's
// kept keys all move by the same -BasePosition, whatever their positions.
//
// The rotation is exact up to the dtype's rounding (reconstruct.Shift
// states the bounds): Put at base s followed by Assemble at offset s gives
// back the caller's keys within twice that.
func (d *Desc) Normalized() (*Desc, error) {
	if d.BasePosition == 0 {
		return d, nil
	}
	m := d.Model
	r, err := reconstruct.NewRoPE(m.RoPE, m.HeadDim)
	if err != nil {
		return nil, fmt.Errorf("packet: normalise keys: %w", err)
	}
	q := *d
	q.Layers = make([]Layer, len(d.Layers))
	n := len(d.Layers[0].K)
	keys := make([]byte, n*len(d.Layers))
	for l, layer := range d.Layers {
		k := keys[l*n : (l+1)*n : (l+1)*n]
		if err := reconstruct.Shift(k, layer.K, m.DType, r, m.KVHeads, d.Rows(), -int64(d.BasePosition)); err != nil {
			return nil, fmt.Errorf("packet: normalise layer %d keys from base %d: %w", l, d.BasePosition, err)
		}
		q.Layers[l] = Layer{K: k, V: layer.V}
	}
	return &q, nil
}
