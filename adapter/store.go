package adapter

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
	"github.com/kvstore/kvstore/store"
)

// ArtifactNote is the Note of an adapter artifact.
const ArtifactNote = "kv-packet-adapter/1 safetensors"

// Put stores a in db for model under id (the artifact
// store.AdapterArtifact(id)), replacing what was there, durably.
func Put(db *store.DB, model format.Fingerprint, id string, a *Adapter) error {
	b, err := a.Encode(safetensors.F32)
	if err != nil {
		return fmt.Errorf("adapter %q: %w", id, err)
	}
	if err := db.PutArtifact(model, store.AdapterArtifact(id), b, store.ArtifactMeta{Note: ArtifactNote}); err != nil {
		return fmt.Errorf("adapter %q: %w", id, err)
	}
	return nil
}

// Get reads the adapter stored in db for model under id, with
// store.GetArtifact's errors (ErrNotFound, ErrModelMismatch) and
// format.ErrCorruption for bytes that are not an adapter.
func Get(db *store.DB, model format.Fingerprint, id string) (*Adapter, error) {
	b, err := db.GetArtifact(model, store.AdapterArtifact(id))
	if err != nil {
		return nil, err
	}
	a, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("adapter %q of model %s: %w", id, model.Short(), err)
	}
	return a, nil
}

// Packet prefills doc with a (nil: no adapter) through m (Prefill) and
// returns it as a packet of spec (its dtype) in namespace, naming adapter
// id: ready for db.Put, which refuses it unless Put(db, spec.Fingerprint(),
// id, a) came first. spec is the model's: its shape must be the KV's.
func Packet(m Model, spec *format.ModelSpec, namespace, id string, a *Adapter, doc []int) (*store.Packet, error) {
	kv, err := a.Prefill(m, doc)
	if err != nil {
		return nil, err
	}
	p, err := packet(spec, namespace, doc, kv)
	if err != nil {
		return nil, err
	}
	if a != nil {
		p.AdapterID, p.HeaderTokens, p.TrailerTokens = id, a.StoredHeaderRows(), a.TrailerRows()
	}
	if p.Tokens() != kv.Rows() {
		return nil, fmt.Errorf("%w: adapter: %d adapter rows and %d tokens for a KV of %d rows",
			format.ErrInvalidArgument, p.HeaderTokens+p.TrailerTokens, len(doc), kv.Rows())
	}
	return p, nil
}

// CachePacket returns doc's prefilled KV as a packet of spec in
// namespace, with no adapter: its keys and values converted from float32
// to spec's dtype, ready for db.Put. kv must hold one row per token of
// doc, in spec's shape.
func CachePacket(spec *format.ModelSpec, namespace string, doc []int, kv *KV) (*store.Packet, error) {
	p, err := packet(spec, namespace, doc, kv)
	if err != nil {
		return nil, err
	}
	if kv.Rows() != len(doc) {
		return nil, fmt.Errorf("%w: adapter: a KV of %d rows for %d tokens", format.ErrInvalidArgument, kv.Rows(), len(doc))
	}
	return p, nil
}

// packet converts kv to a packet of spec holding doc's token ids.
func packet(spec *format.ModelSpec, namespace string, doc []int, kv *KV) (*store.Packet, error) {
	if err := kv.check(); err != nil {
		return nil, err
	}
	if len(kv.K) != spec.Layers || kv.KVHeads != spec.KVHeads || kv.HeadDim != spec.HeadDim {
		return nil, fmt.Errorf("%w: adapter: a KV of %d layers x %d kv heads x %d dims for a model spec of %d x %d x %d",
			format.ErrInvalidArgument, len(kv.K), kv.KVHeads, kv.HeadDim, spec.Layers, spec.KVHeads, spec.HeadDim)
	}
	p := &store.Packet{PacketDesc: format.PacketDesc{Namespace: namespace, Model: spec}}
	for i, t := range doc {
		if t < 0 || int64(t) > math.MaxUint32 {
			return nil, fmt.Errorf("%w: adapter: token %d at index %d", format.ErrInvalidArgument, t, i)
		}
		p.TokenIDs = append(p.TokenIDs, uint32(t))
	}
	for l := range kv.K {
		k, v := make([]byte, len(kv.K[l])*spec.DType.Size()), make([]byte, len(kv.V[l])*spec.DType.Size())
		if err := format.FromF32(k, kv.K[l], spec.DType); err != nil {
			return nil, err
		}
		if err := format.FromF32(v, kv.V[l], spec.DType); err != nil {
			return nil, err
		}
		p.Layers = append(p.Layers, store.Layer{K: k, V: v})
	}
	return p, nil
}
