package adapter

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
	"github.com/kvstore/kvstore/lab/llama"
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

// Packet prefills doc with a (nil: no adapter) and returns it as a packet
// of spec (its dtype) in namespace, naming adapter id: ready for db.Put,
// which refuses it unless Put(db, spec.Fingerprint(), id, a) came first.
func Packet(m *llama.Model, spec *format.ModelSpec, namespace, id string, a *Adapter, doc []int) (*store.Packet, error) {
	c, err := a.Prefill(m, doc)
	if err != nil {
		return nil, err
	}
	p, err := CachePacket(spec, namespace, doc, c)
	if err != nil {
		return nil, err
	}
	if a != nil {
		p.AdapterID, p.HeaderTokens, p.TrailerTokens = id, a.StoredHeaderRows(), a.TrailerRows()
	}
	return p, nil
}

// CachePacket returns doc's prefilled cache c as a packet of spec in
// namespace, with no adapter: its keys and values converted from float32
// to spec's dtype, ready for db.Put.
func CachePacket(spec *format.ModelSpec, namespace string, doc []int, c *llama.Cache) (*store.Packet, error) {
	p := &store.Packet{PacketDesc: format.PacketDesc{Namespace: namespace, Model: spec}}
	for _, t := range doc {
		p.TokenIDs = append(p.TokenIDs, uint32(t))
	}
	for _, kv := range c.Layers {
		k, v := make([]byte, len(kv.K)*spec.DType.Size()), make([]byte, len(kv.V)*spec.DType.Size())
		if err := format.FromF32(k, kv.K, spec.DType); err != nil {
			return nil, err
		}
		if err := format.FromF32(v, kv.V, spec.DType); err != nil {
			return nil, err
		}
		p.Layers = append(p.Layers, store.Layer{K: k, V: v})
	}
	return p, nil
}
