package view

import (
	"fmt"
	"sync"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
)

// Decode decodes the stored bytes b of chunk i of header h into dst,
// exactly its RawLength bytes. Bytes that passed their CRC but do not
// decode are ErrCorruption.
func Decode(h *format.PacketHeader, i int, b, dst []byte) error {
	c := &h.Chunks[i]
	d, err := codec.DescOf(c)
	if err != nil {
		return fmt.Errorf("%w: packet %s chunk %d: %v", ErrCorruption, h.ID.Short(), i, err)
	}
	if err := codec.Decode(dst, b, c.Codec, d); err != nil {
		return fmt.Errorf("%w: packet %s layer %d %v: %v", ErrCorruption, h.ID.Short(), c.Layer, c.Kind, err)
	}
	return nil
}

// viewDecoded holds a View's decoded copies of its compressed chunks.
type viewDecoded struct {
	mu   sync.Mutex
	bufs [][]byte
}

// decoded returns chunk i as a tensor: the stored bytes themselves for a
// raw chunk, else its decoding, made once and kept by the view.
func (v *View) decoded(i int) ([]byte, error) {
	b, err := v.Chunk(i)
	if err != nil || v.h.Chunks[i].Codec == format.CodecRaw {
		return b, err
	}
	v.dec.mu.Lock()
	defer v.dec.mu.Unlock()
	if v.dec.bufs == nil {
		v.dec.bufs = make([][]byte, len(v.h.Chunks))
	}
	if d := v.dec.bufs[i]; d != nil {
		return d, nil
	}
	d := make([]byte, v.h.Chunks[i].RawLength)
	if err := Decode(v.h, i, b, d); err != nil {
		v.st.Corruptions.Add(1)
		return nil, err
	}
	v.dec.bufs[i] = d
	return d, nil
}
