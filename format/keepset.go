package format

import (
	"encoding/binary"
	"fmt"
)

// A keep-set's bytes ("KVKS"), for a server that keeps keep-sets beside its
// packets (as a store artifact, say). prune.Set marshals through these
// functions and adds its own validation. All integers little endian:
//
//	+--------+------------+--------------+------------+--------+--------+-----+------------+
//	| "KVKS" | layers u32 | kv heads u32 | tokens u32 | list 0 | list 1 | ... | crc32c u32 |
//	+--------+------------+--------------+------------+--------+--------+-----+------------+
//	0        4            8              12           16
//
//	list g (layer g/kv heads, head g%kv heads): | n u32 | n positions u32 |
//
// The CRC32C covers every byte before it. DecodeKeepSet checks the frame
// (magic, CRC, shape, list lengths against the input) and allocates no
// more than the input's length justifies; it does not check that the
// positions are increasing and below tokens (prune.Set.Validate does).
const keepSetMagic = "KVKS"

// KeepSet is the decoded shape of a "KVKS" encoding, field for field
// prune.Set: Keep[l*KVHeads+h] are the kept positions of (layer l, head h).
type KeepSet struct {
	Layers, KVHeads, Tokens int
	Keep                    [][]int32
}

// AppendKeepSet appends the encoding of s to dst. s must have Layers *
// KVHeads lists (the caller validated it).
func AppendKeepSet(dst []byte, s *KeepSet) []byte {
	start := len(dst)
	le := binary.LittleEndian
	dst = append(dst, keepSetMagic...)
	dst = le.AppendUint32(dst, uint32(s.Layers))
	dst = le.AppendUint32(dst, uint32(s.KVHeads))
	dst = le.AppendUint32(dst, uint32(s.Tokens))
	for _, k := range s.Keep {
		dst = le.AppendUint32(dst, uint32(len(k)))
		for _, t := range k {
			dst = le.AppendUint32(dst, uint32(t))
		}
	}
	return le.AppendUint32(dst, CRC(dst[start:]))
}

// KeepSetSize is the length of s's encoding.
func KeepSetSize(s *KeepSet) int {
	n := 16 + 4
	for _, k := range s.Keep {
		n += 4 + 4*len(k)
	}
	return n
}

// DecodeKeepSet checks and parses an encoding made by AppendKeepSet. Bad
// bytes are ErrCorruption, never a panic.
func DecodeKeepSet(b []byte) (*KeepSet, error) {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: prune: keep-set of %d bytes: %s", ErrCorruption, len(b), fmt.Sprintf(f, args...))
	}
	if len(b) < 20 || string(b[:4]) != keepSetMagic {
		return nil, bad("no keep-set header")
	}
	body := b[:len(b)-4]
	le := binary.LittleEndian
	if got, want := CRC(body), le.Uint32(b[len(b)-4:]); got != want {
		return nil, bad("crc32c %08x, computed %08x", want, got)
	}
	layers, heads, tokens := le.Uint32(b[4:]), le.Uint32(b[8:]), le.Uint32(b[12:])
	rest := body[16:]
	if layers == 0 || heads == 0 || uint64(layers)*uint64(heads) > uint64(len(rest)/8) || tokens == 0 || tokens > 1<<31-1 {
		return nil, bad("shape %d x %d x %d", layers, heads, tokens)
	}
	out := &KeepSet{Layers: int(layers), KVHeads: int(heads), Tokens: int(tokens), Keep: make([][]int32, layers*heads)}
	for g := range out.Keep {
		if len(rest) < 4 {
			return nil, bad("list %d missing", g)
		}
		n := le.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)/4) {
			return nil, bad("list %d of %d entries overruns the input", g, n)
		}
		k := make([]int32, n)
		for i := range k {
			k[i] = int32(le.Uint32(rest[4*i:]))
		}
		out.Keep[g], rest = k, rest[4*n:]
	}
	if len(rest) != 0 {
		return nil, bad("%d bytes after the last list", len(rest))
	}
	return out, nil
}
