package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"
)

// WriteKV writes to w the file EncodeKV(kv) encodes, byte for byte, without
// holding its tensor data: kv.K and kv.V are not read. fill is called once
// per layer for K (half 0) of every layer, then V (half 1) of every layer,
// in file order, with one buffer of one layer's bytes (KVHeads * Tokens *
// HeadDim * dtype size) to fill; so at most that much is in memory, however
// large the packet. WriteKV returns the bytes written.
func WriteKV(w io.Writer, kv *KV, fill func(half, layer int, buf []byte) error) (int64, error) {
	m := &kv.Model
	if err := m.Validate(); err != nil {
		return 0, fmt.Errorf("safetensors: kv: %w", err)
	}
	s := kv.Tokens()
	if s <= 0 || kv.HeaderTokens < 0 || kv.TrailerTokens < 0 {
		return 0, invalid("kv: %d tokens", s)
	}
	n := m.KVHeads * s * m.HeadDim * m.DType.Size()
	meta, err := kvMetadata(kv)
	if err != nil {
		return 0, err
	}
	pos := make([]byte, 8*s)
	for i := range s {
		binary.LittleEndian.PutUint64(pos[8*i:], uint64(kv.KeyPosition+int64(i)))
	}
	shape := []uint64{2, uint64(m.Layers), 1, uint64(m.KVHeads), uint64(s), uint64(m.HeadDim)}
	f := &File{Metadata: meta, Tensors: []Tensor{
		{Name: NameKV, DType: dtypeOf(m.DType), Shape: shape, streamed: uint64(2 * m.Layers * n)},
		{Name: NamePositions, DType: I64, Shape: []uint64{1, uint64(s)}, Data: pos},
	}}
	h, err := f.Header()
	if err != nil {
		return 0, err
	}
	c, err := w.Write(h)
	total := int64(c)
	if err != nil {
		return total, err
	}
	buf := make([]byte, n)
	for half := range 2 {
		for l := range m.Layers {
			if err := fill(half, l, buf); err != nil {
				return total, err
			}
			c, err := w.Write(buf)
			total += int64(c)
			if err != nil {
				return total, err
			}
		}
	}
	c, err = w.Write(pos)
	return total + int64(c), err
}
