package quality

import (
	"context"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store"
)

// assemble reads packet id (stored in namespace ns) back through
// store.PrepareAssemblePruned at offset 0, pruned by keep (nil: whole),
// and returns each (layer, KV head)'s rows as f32.
func (ps *packetStore) assemble(id format.PacketID, ns string, keep *prune.Set) ([][]rowSet, error) {
	a, err := ps.db.PrepareAssemblePruned(context.Background(), ns, ps.spec.Fingerprint(), []store.AssembleItem{{ID: id}}, []*prune.Set{keep})
	if err != nil {
		return nil, err
	}
	defer a.Release()
	rows := a.Tokens()
	d := store.NewContiguousDest(ps.spec, rows)
	if err := a.Run(context.Background(), d, nil); err != nil {
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

// storedBytes is the sum of the stored lengths of packet id's chunks (in
// namespace ns), as its header records them.
func (ps *packetStore) storedBytes(ns string, id format.PacketID) (int, error) {
	v, err := ps.db.Get(context.Background(), ns, ps.spec.Fingerprint(), id)
	if err != nil {
		return 0, err
	}
	defer v.Release()
	total := 0
	for _, c := range v.Header().Chunks {
		total += int(c.Length)
	}
	return total, nil
}
