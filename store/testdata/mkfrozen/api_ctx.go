//go:build ignore

// The store calls of format 1.1 and later, which take a context.

package main

import (
	"context"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

var ctx = context.Background()

func put(db *store.DB, p *store.Packet) (format.PacketID, error) { return db.Put(ctx, p) }

func get(db *store.DB, ns string, fp format.Fingerprint, id format.PacketID) (*store.View, error) {
	return db.Get(ctx, ns, fp, id)
}

func has(db *store.DB, ns string, fp format.Fingerprint, id format.PacketID) (bool, error) {
	return db.Has(ctx, ns, fp, id)
}

func del(db *store.DB, ns string, fp format.Fingerprint, id format.PacketID) error {
	return db.Delete(ctx, ns, fp, id)
}

func putSpan(db *store.DB, ns, name string, m *store.SpanMemory) error {
	_, err := db.PutSpanMemory(ctx, ns, name, m)
	return err
}

func openSpan(db *store.DB, ns string, fp format.Fingerprint, name string) (*store.SpanReader, error) {
	return db.OpenSpanMemory(ctx, ns, fp, name)
}
