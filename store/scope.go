package store

import (
	"context"
	"fmt"

	"github.com/kvstore/kvstore/format"
)

// Scope is the DB seen through one (namespace, model): the handle a server
// keeps per tenant and model, so that request-path calls name only the
// packet. Its methods are the DB's with the namespace and the model's
// fingerprint filled in; errors are theirs. A Scope is as safe for
// concurrent use as the DB, holds nothing open, and stays valid until the
// DB is closed.
type Scope struct {
	db   *DB
	ns   string
	spec format.ModelSpec
	fp   format.Fingerprint
}

// Scope returns the handle of namespace ns for model m (copied). A bad
// namespace or spec is ErrInvalidArgument, and so is a spec without a
// WeightsID: the weights are part of the fingerprint, so that models of
// one shape with different weights never share packets, and a handle kept
// for a tenant's model must name them.
func (db *DB) Scope(ns string, m *format.ModelSpec) (*Scope, error) {
	if err := format.CheckNamespace(ns); err != nil {
		return nil, err
	}
	switch {
	case m == nil:
		return nil, fmt.Errorf("%w: scope: nil model spec", ErrInvalidArgument)
	case m.WeightsID == "":
		return nil, fmt.Errorf("%w: scope: model spec without a WeightsID (models with other weights would share its packets)", ErrInvalidArgument)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &Scope{db: db, ns: ns, spec: *m, fp: m.Fingerprint()}, nil
}

// Namespace is the scope's namespace.
func (s *Scope) Namespace() string { return s.ns }

// Model returns a copy of the scope's model spec.
func (s *Scope) Model() format.ModelSpec { return s.spec }

// Fingerprint is the scope's model fingerprint.
func (s *Scope) Fingerprint() format.Fingerprint { return s.fp }

// Put is DB.Put of p in the scope: p's Namespace may be empty and its
// Model nil (the scope's are used, in a copy of p; p is not modified); a
// packet naming another namespace or model is ErrInvalidArgument.
func (s *Scope) Put(ctx context.Context, p *Packet) (format.PacketID, error) {
	if p == nil {
		return format.PacketID{}, fmt.Errorf("%w: put: nil packet", ErrInvalidArgument)
	}
	q := *p
	switch {
	case q.Namespace != "" && q.Namespace != s.ns:
		return format.PacketID{}, fmt.Errorf("%w: put: packet of namespace %q through the scope of %q", ErrInvalidArgument, q.Namespace, s.ns)
	case q.Model != nil && q.Model.Fingerprint() != s.fp:
		return format.PacketID{}, fmt.Errorf("%w: put: packet of model %s through the scope of model %s",
			ErrInvalidArgument, q.Model.Fingerprint().Short(), s.fp.Short())
	}
	q.Namespace = s.ns
	if q.Model == nil {
		spec := s.spec
		q.Model = &spec
	}
	return s.db.Put(ctx, &q)
}

// Get is DB.Get of packet id in the scope.
func (s *Scope) Get(ctx context.Context, id format.PacketID) (*View, error) {
	return s.db.Get(ctx, s.ns, s.fp, id)
}

// Has is DB.Has of packet id in the scope.
func (s *Scope) Has(ctx context.Context, id format.PacketID) (bool, error) {
	return s.db.Has(ctx, s.ns, s.fp, id)
}

// Delete is DB.Delete of packet id in the scope.
func (s *Scope) Delete(ctx context.Context, id format.PacketID) error {
	return s.db.Delete(ctx, s.ns, s.fp, id)
}

// List is DB.List of the scope's packets.
func (s *Scope) List(cursor []byte, limit int) ([]format.PacketID, []byte, error) {
	return s.db.List(s.ns, s.fp, cursor, limit)
}

// Assemble is DB.Assemble in the scope.
func (s *Scope) Assemble(ctx context.Context, items []AssembleItem, dst *Dest, o *AssembleOptions) error {
	return s.db.Assemble(ctx, s.ns, s.fp, items, dst, o)
}

// AssembleInto is DB.AssembleInto in the scope: the destination is sized
// and allocated for the items.
func (s *Scope) AssembleInto(ctx context.Context, items []AssembleItem, shape DestShape, o *AssembleOptions) (*Dest, error) {
	return s.db.AssembleInto(ctx, s.ns, s.fp, items, shape, o)
}

// PrepareAssemble is DB.PrepareAssemble in the scope.
func (s *Scope) PrepareAssemble(ctx context.Context, items []AssembleItem) (*Assembly, error) {
	return s.db.PrepareAssemble(ctx, s.ns, s.fp, items)
}

// Pin is DB.Pin of packet id in the scope.
func (s *Scope) Pin(id format.PacketID) error { return s.db.Pin(s.ns, s.fp, id) }

// Unpin is DB.Unpin of packet id in the scope.
func (s *Scope) Unpin(id format.PacketID) error { return s.db.Unpin(s.ns, s.fp, id) }

// Pinned is DB.Pinned of packet id in the scope.
func (s *Scope) Pinned(id format.PacketID) (bool, error) { return s.db.Pinned(s.ns, s.fp, id) }

// OpenSpanMemory is DB.OpenSpanMemory of context name in the scope.
func (s *Scope) OpenSpanMemory(ctx context.Context, name string) (*SpanReader, error) {
	return s.db.OpenSpanMemory(ctx, s.ns, s.fp, name)
}
