package store

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// packetState is what a crash may leave of a packet.
type packetState int

const (
	putPending    packetState = iota // Put called, not returned: present or absent
	live                             // Put acknowledged: must be present and exact
	deletePending                    // Delete called, not returned: present (and exact) or absent
	deleted                          // Delete acknowledged: must be absent
)

// ledger records the workload's packets and their states, under a mutex,
// because crash clones are taken from whatever goroutine syncs (Pebble
// syncs its WAL from its own).
type ledger struct {
	mu      sync.Mutex
	packets map[format.PacketID]*Packet
	states  map[format.PacketID]packetState
}

func newLedger() *ledger {
	return &ledger{packets: map[format.PacketID]*Packet{}, states: map[format.PacketID]packetState{}}
}

func (l *ledger) set(id format.PacketID, p *Packet, s packetState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.packets[id] = p
	l.states[id] = s
}

func (l *ledger) snapshot() map[format.PacketID]packetState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.states)
}

// frozen calls fn with a snapshot of the states while no state can change,
// so that crash clones taken in fn agree with it. A hook can fire on the
// catalog's background sync (catalog.Syncer), on its own goroutine, while
// the workload goes on: without the freeze the workload could finish a
// Delete between the snapshot and a clone, which then lacks a packet the
// snapshot calls live.
func (l *ledger) frozen(fn func(states map[format.PacketID]packetState)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(maps.Clone(l.states))
}

// crashWorkload puts packets (crossing blob files) and deletes some,
// recording every step in l.
func crashWorkload(t *testing.T, fs vfs.FS, l *ledger) {
	db, err := Open("/db", &Options{FS: fs, BlobFileSize: 24 << 10})
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec(format.DTypeBF16, 2, 2, 8)
	fp := spec.Fingerprint()
	var ids []format.PacketID
	for i := range 7 {
		p := randPacket(spec, "ns", 40+100*(i%3), uint64(i)) // 5-21 KiB extents
		id := format.ComputePacketID(p.Namespace, fp, "", p.TokenIDs)
		l.set(id, p, putPending)
		if _, err := db.Put(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		l.set(id, p, live)
		ids = append(ids, id)
		if i%3 == 2 {
			del := ids[i-1]
			l.set(del, l.packets[del], deletePending)
			if err := db.Delete(context.Background(), "ns", fp, del); err != nil {
				t.Fatal(err)
			}
			l.set(del, l.packets[del], deleted)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// crashClone is a file system as a crash could leave it, and the states
// the ledger held when it was taken.
type crashClone struct {
	name   string
	fs     *vfs.MemFS
	states map[format.PacketID]packetState
}

// TestCrashAtEverySync takes crash clones before every sync the store or
// its catalog makes (and at the end), keeping 0, 50 and 100% of the
// unsynced data, and checks each: the store opens, every acknowledged
// Put reads back bit-exactly with CRCs checked, nothing acknowledged as
// deleted is there, every catalogued packet's chunks pass their CRCs (no
// header points at bytes that were not synced), and the store accepts new
// writes.
func TestCrashAtEverySync(t *testing.T) {
	clones, l := crashClonesSeeded(t, 1, 2, func(fs vfs.FS, l *ledger) { crashWorkload(t, fs, l) })
	t.Logf("%d crash clones", len(clones))
	if len(clones) < 60 {
		t.Fatalf("only %d sync points", len(clones))
	}
	reconciled := 0
	for _, c := range clones {
		if checkCrashClone(t, c, l) {
			reconciled++
		}
	}
	// Puts and Deletes are acknowledged before the catalog's WAL syncs
	// behind them, so clones taken before a background sync lack their
	// batches: those must come back from the blob log.
	t.Logf("%d of %d clones applied records the catalog had lost", reconciled, len(clones))
	if reconciled == 0 {
		t.Fatal("no clone needed reconciliation: the campaign does not reach the catalog's lag behind the blob log")
	}
}

// checkCrashClone checks clone c against the ledger, and reports whether
// its Open applied records from the blob log that the catalog lacked.
func checkCrashClone(t *testing.T, c crashClone, l *ledger) (reconciled bool) {
	t.Helper()
	db, err := Open("/db", &Options{FS: c.fs, BlobFileSize: 24 << 10})
	if err != nil {
		t.Fatalf("clone %s: Open: %v", c.name, err)
	}
	defer db.Close()
	r := db.Stats().Reconciled
	reconciled = r.Changed()
	checkAllHeaders(t, db, c.name)
	for id, st := range c.states {
		checkState(t, db, l.packets[id], id, st, c.name)
	}
	// The recovered store takes new packets, and they do not disturb old ones.
	spec := testSpec(format.DTypeBF16, 2, 2, 8)
	p := randPacket(spec, "ns", 50, 1000)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatalf("clone %s: Put after recovery: %v", c.name, err)
	}
	checkPacket(t, db, p, id)
	checkAllHeaders(t, db, c.name)
	return reconciled
}

// checkState checks that packet id is in db as its state demands.
func checkState(t *testing.T, db *DB, p *Packet, id format.PacketID, st packetState, where string) {
	t.Helper()
	fp := p.Model.Fingerprint()
	ok, err := db.Has(context.Background(), p.Namespace, fp, id)
	if err != nil {
		t.Fatalf("%s: Has %s: %v", where, id.Short(), err)
	}
	switch {
	case ok && st != deleted:
		checkPacket(t, db, p, id)
	case ok:
		t.Fatalf("%s: packet %s was deleted (acknowledged) but is present", where, id.Short())
	case st == live:
		t.Fatalf("%s: acknowledged packet %s is lost", where, id.Short())
	}
	if !ok {
		if _, err := db.Get(context.Background(), p.Namespace, fp, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: Get of absent packet %s: %v", where, id.Short(), err)
		}
	}
}

// checkAllHeaders reads every chunk of every catalogued packet, CRCs on:
// none may point at bytes that are missing or were never synced.
func checkAllHeaders(t *testing.T, db *DB, where string) {
	t.Helper()
	err := db.Headers(func(h *format.PacketHeader) error {
		v, err := db.Get(context.Background(), h.Namespace, h.Model, h.ID)
		if err != nil {
			return err
		}
		defer v.Release()
		for i := range h.Chunks {
			if _, err := v.Chunk(i); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: catalogued packet does not read back: %v", where, err)
	}
}
