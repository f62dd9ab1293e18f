package prune

import (
	"encoding/binary"
	"fmt"

	"github.com/kvstore/kvstore/format"
)

// A keep-set's bytes, for a server that keeps keep-sets beside its packets
// (as a store artifact, say). All integers little endian:
//
//	0        4            8             12           16
//	| "KVKS" | layers u32 | kv heads u32 | tokens u32 | list 0 | list 1 | ... | crc32c u32 |
//
//	list g (layer g/kv heads, head g%kv heads): | n u32 | n positions u32 |
//
// The CRC32C covers every byte before it. UnmarshalBinary accepts exactly
// what Validate accepts, refuses anything else with format.ErrCorruption,
// and allocates no more than the input's length justifies.
const setMagic = "KVKS"

// MarshalBinary encodes a valid set; an invalid one is ErrInvalidArgument.
func (s *Set) MarshalBinary() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	n := 16 + 4
	for _, k := range s.Keep {
		n += 4 + 4*len(k)
	}
	b := make([]byte, 0, n)
	b = append(b, setMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(s.Layers))
	b = binary.LittleEndian.AppendUint32(b, uint32(s.KVHeads))
	b = binary.LittleEndian.AppendUint32(b, uint32(s.Tokens))
	for _, k := range s.Keep {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		for _, t := range k {
			b = binary.LittleEndian.AppendUint32(b, uint32(t))
		}
	}
	return binary.LittleEndian.AppendUint32(b, format.CRC(b)), nil
}

// UnmarshalBinary decodes b into s (see MarshalBinary for the layout).
func (s *Set) UnmarshalBinary(b []byte) error {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: prune: keep-set of %d bytes: %s", format.ErrCorruption, len(b), fmt.Sprintf(f, args...))
	}
	if len(b) < 20 || string(b[:4]) != setMagic {
		return bad("no keep-set header")
	}
	body := b[:len(b)-4]
	if got, want := format.CRC(body), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		return bad("crc32c %08x, computed %08x", want, got)
	}
	le := binary.LittleEndian
	layers, heads, tokens := le.Uint32(b[4:]), le.Uint32(b[8:]), le.Uint32(b[12:])
	rest := body[16:]
	if layers == 0 || heads == 0 || uint64(layers)*uint64(heads) > uint64(len(rest)/8) || tokens == 0 || tokens > 1<<31-1 {
		return bad("shape %d x %d x %d", layers, heads, tokens)
	}
	out := Set{Layers: int(layers), KVHeads: int(heads), Tokens: int(tokens), Keep: make([][]int32, layers*heads)}
	for g := range out.Keep {
		if len(rest) < 4 {
			return bad("list %d missing", g)
		}
		n := le.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)/4) {
			return bad("list %d of %d entries overruns the input", g, n)
		}
		k := make([]int32, n)
		for i := range k {
			k[i] = int32(le.Uint32(rest[4*i:]))
		}
		out.Keep[g], rest = k, rest[4*n:]
	}
	if len(rest) != 0 {
		return bad("%d bytes after the last list", len(rest))
	}
	if err := out.Validate(); err != nil {
		return bad("%v", err)
	}
	*s = out
	return nil
}
