package store

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
)

// Pruned packets on disk.
//
// A Packet with a keep-set (Packet.Keep) is stored compacted: each layer's
// K and V chunk holds only the kept rows, [kv_heads][k][head_dim] with k
// rows per (layer, KV head) in position order, and one more chunk after
// the last layer's V marks the kept local positions in a bitmap of
// n = ceil(Tokens/8) bytes per (layer, KV head):
//
//	chunk 2*layers (kind positions, dtype u8, always raw):
//	| (layer 0, head 0): n bytes | (0, 1) | ... | (layers-1, kv_heads-1) |
//	position t kept <=> bit t%8 (LSB first) of byte t/8 is set
//
// Each bitmap has exactly k bits set, and none at or beyond Tokens (the
// last byte's padding bits are zero). It costs Tokens/8 bytes per (layer,
// KV head) whatever k is. The header says KeptTokens = k
// (format.PacketHeader.Pruned). Keys stay
// post-RoPE at their original local positions t (they are not
// renumbered), so placing one at offset o rotates it by o like every other
// key: the shift is uniform although the positions are ragged. The chunk
// codec applies to the compacted K|V chunks as to whole ones, over k rows
// (a lossy codec's groups are taken over the kept rows). The low-rank
// codec un-rotates keys at rows 0..k-1 before factoring them, not at their
// kept positions: its decoding rotates them back the same way, so it stays
// correct, but the matrix factored is not the pre-RoPE keys and compresses
// less well than a whole packet's. The packet keeps
// its document's id; the positions chunk has a CRC32C like every chunk, so
// Verify, Compact, GC and eviction treat a pruned packet like any other.
//
// Reads: View.Layer returns the compacted tensors; View.Keep returns the
// kept positions (CRC-verified, then checked: a bad bitmap is ErrCorruption);
// Assemble places k rows per head and Assembly.Positions maps them to
// absolute positions (assemble_prune.go).

// keptRows checks p's keep-set against p (its model is valid) and returns
// the rows it keeps per (layer, KV head): Tokens when it has none.
func (p *Packet) keptRows() (int, error) {
	k := p.Keep
	if k == nil {
		return p.Tokens(), nil
	}
	if err := k.Validate(); err != nil {
		return 0, fmt.Errorf("packet: %w", err) // wraps ErrInvalidArgument
	}
	m := p.Model
	if k.Layers != m.Layers || k.KVHeads != m.KVHeads || k.Tokens != p.Tokens() {
		return 0, fmt.Errorf("%w: packet: keep-set for %d layers x %d heads x %d tokens, packet is %d x %d x %d",
			ErrInvalidArgument, k.Layers, k.KVHeads, k.Tokens, m.Layers, m.KVHeads, p.Tokens())
	}
	n, ok := k.Rows()
	if !ok {
		return 0, fmt.Errorf("%w: packet: keep-set keeps different numbers of rows per (layer, head)", ErrInvalidArgument)
	}
	return n, nil
}

// compacted returns p itself when it is stored whole (no keep-set, or one
// keeping every row), else a copy whose layers hold only the kept rows,
// gathered into new buffers, with its positions chunk. p was checked.
func (p *Packet) compacted() *Packet {
	k, _ := p.keptRows()
	n := p.Tokens()
	if p.Keep == nil || k == n {
		return p
	}
	m := p.Model
	rb := m.HeadDim * m.DType.Size()
	q := *p
	q.kept = k
	q.Layers = make([]Layer, len(p.Layers))
	size := m.KVHeads * k * rb
	buf := make([]byte, 2*len(p.Layers)*size)
	for l, layer := range p.Layers {
		kk, vv := buf[2*l*size:(2*l+1)*size:(2*l+1)*size], buf[(2*l+1)*size:(2*l+2)*size:(2*l+2)*size]
		for h := range m.KVHeads {
			for j, t := range p.Keep.Kept(l, h) {
				src, dst := (h*n+int(t))*rb, (h*k+j)*rb
				copy(kk[dst:dst+rb], layer.K[src:src+rb])
				copy(vv[dst:dst+rb], layer.V[src:src+rb])
			}
		}
		q.Layers[l] = Layer{K: kk, V: vv}
	}
	q.positions = encodePositions(p.Keep)
	return &q
}

// encodePositions is the positions chunk of keep-set s (checked), drawn
// in format/positions.go.
func encodePositions(s *prune.Set) []byte { return format.AppendPositions(nil, s.Tokens, s.Keep) }

// rowBytes is the bytes of one (layer, KV head) bitmap of a packet of
// tokens rows: ceil(tokens/8).
func rowBytes(tokens int) int { return format.PositionsRowBytes(tokens) }
