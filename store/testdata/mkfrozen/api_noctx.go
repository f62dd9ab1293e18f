//go:build ignore

// The store calls of format 1.0, which took no context.

package main

import (
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

func put(db *store.DB, p *store.Packet) (format.PacketID, error) { return db.Put(p) }

func get(db *store.DB, ns string, fp format.Fingerprint, id format.PacketID) (*store.View, error) {
	return db.Get(ns, fp, id)
}

func has(db *store.DB, ns string, fp format.Fingerprint, id format.PacketID) (bool, error) {
	return db.Has(ns, fp, id)
}

func del(db *store.DB, ns string, fp format.Fingerprint, id format.PacketID) error {
	return db.Delete(ns, fp, id)
}

func putSpan(db *store.DB, ns, name string, m *store.SpanMemory) error {
	_, err := db.PutSpanMemory(ns, name, m)
	return err
}

func openSpan(db *store.DB, ns string, fp format.Fingerprint, name string) (*store.SpanReader, error) {
	return db.OpenSpanMemory(ns, fp, name)
}
