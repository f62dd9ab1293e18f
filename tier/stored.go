package tier

import (
	"context"
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// PushStored pushes a packet the local store already holds (the library
// call of the CLI's `tier push`): its tensors as the store serves them,
// every chunk verified as it is read. The keys are stored at local
// positions, so the tier's copy has base position 0 (the origin's base is
// metadata only), and a chunk stored under a codec is pushed decoded, as
// raw: a fetch then stores exactly the tensors this store serves. A pruned
// packet is ErrInvalidArgument.
func (t *Tier) PushStored(ctx context.Context, db *store.DB, ns string, fp format.Fingerprint, id format.PacketID) (Pushed, error) {
	v, err := db.Get(ctx, ns, fp, id)
	if err != nil {
		return 0, err
	}
	defer v.Release()
	h := v.Header()
	if h.Pruned() {
		return 0, fmt.Errorf("%w: packet %s is pruned: the tier holds whole packets only", ErrInvalidArgument, id.Short())
	}
	m, err := db.Model(fp)
	if err != nil {
		return 0, err
	}
	p := &store.Packet{PacketDesc: format.PacketDesc{Namespace: ns, Model: m, AdapterID: h.AdapterID,
		HeaderTokens: int(h.HeaderTokens), TrailerTokens: int(h.TrailerTokens), TokenIDs: h.TokenIDs}}
	for l := range v.Layers() {
		k, val, err := v.Layer(l)
		if err != nil {
			return 0, err
		}
		p.Layers = append(p.Layers, store.Layer{K: k, V: val})
	}
	_, how, err := t.Push(ctx, p)
	return how, err
}
