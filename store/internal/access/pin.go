package access

import (
	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Pins keep packets from eviction. They are durable, written and deleted
// in synced batches, and deleted with the packet (DeleteKeys):
//
//	'p' | ns len u16 BE | ns | packet id (32) -> empty

// SetPin adds to b packet (ns, id)'s pin record, or its removal when pin
// is false. Once b is committed the caller marks the table (Table.Pin).
func SetPin(b *pebble.Batch, ns string, id format.PacketID, pin bool) {
	if pin {
		_ = b.Set(catalog.PinKey(ns, id), nil, nil)
	} else {
		_ = b.Delete(catalog.PinKey(ns, id), nil)
	}
}

// Pinned reports whether packet (ns, id) has a pin record in c.
func Pinned(c *catalog.Catalog, ns string, id format.PacketID) (bool, error) {
	return c.Has(catalog.PinKey(ns, id))
}

// Pin sets the pin state of k's entry, if the table holds one (an entry
// created later is loaded with its pin record).
func (t *Table) Pin(k Key, pin bool) {
	if e := t.Entry(k, false); e != nil {
		e.Pinned = pin
	}
}
