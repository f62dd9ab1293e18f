package quality

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/codec"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store"
)

// assemble reads packet id (stored in namespace ns) back through
// store.PrepareAssemblePruned at offset 0, pruned by keep (nil: whole),
// and returns each (layer, KV head)'s rows as f32.
func (ps *packetStore) assemble(id format.PacketID, ns string, keep *prune.Set) ([][]rowSet, error) {
	a, err := ps.db.PrepareAssemblePruned(ns, ps.spec.Fingerprint(), []store.AssembleItem{{ID: id}}, []*prune.Set{keep})
	if err != nil {
		return nil, err
	}
	defer a.Release()
	rows := a.Tokens()
	d := store.NewContiguousDest(ps.spec, rows)
	if err := a.Run(d, nil); err != nil {
		return nil, err
	}
	H, hd := ps.spec.KVHeads, ps.spec.HeadDim
	sets := make([][]rowSet, ps.spec.Layers)
	for l := range sets {
		k, v := make([]float32, H*rows*hd), make([]float32, H*rows*hd)
		if err := format.ToF32(k, d.K[l], ps.spec.DType); err != nil {
			return nil, err
		}
		if err := format.ToF32(v, d.V[l], ps.spec.DType); err != nil {
			return nil, err
		}
		sets[l] = make([]rowSet, H)
		for g := range H {
			sets[l][g] = rowSet{k: k[g*rows*hd : (g+1)*rows*hd], v: v[g*rows*hd : (g+1)*rows*hd]}
		}
	}
	return sets, nil
}

// storedBytes is what the packet's chunks take stored under codec c: the
// chunks' lengths in the store's header when whole, and when pruned the
// kept rows of every chunk, compacted and encoded as Put encodes chunks.
func (ps *packetStore) storedBytes(c format.Codec, o codec.Options, keep *prune.Set) (int, error) {
	total := 0
	for l, layer := range ps.base.Layers {
		for i, src := range [][]byte{layer.K, layer.V} {
			kind := format.ChunkK
			if i == 1 {
				kind = format.ChunkV
			}
			d := codec.Desc{Kind: kind, DType: ps.spec.DType, Heads: ps.spec.KVHeads, Tokens: ps.n, HeadDim: ps.spec.HeadDim}
			if keep != nil {
				src, d.Tokens = compact(src, keep, l, d), len(keep.Kept(l, 0))
			}
			enc, err := codec.Encode(nil, src, c, d, o)
			if err != nil {
				return 0, fmt.Errorf("quality: encode layer %d %v: %w", l, kind, err)
			}
			total += min(len(enc), len(src))
		}
	}
	return total, nil
}

// compact gathers layer l's kept rows of chunk src (d's shape) into
// [heads][kept][head_dim].
func compact(src []byte, keep *prune.Set, l int, d codec.Desc) []byte {
	rb := d.HeadDim * d.DType.Size()
	var out []byte
	for h := range d.Heads {
		for _, t := range keep.Kept(l, h) {
			at := (h*d.Tokens + int(t)) * rb
			out = append(out, src[at:at+rb]...)
		}
	}
	return out
}
