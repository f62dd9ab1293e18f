package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/kvstore/kvstore/format"
)

// storeOp reports whether an operation is on the store's own files. The
// catalog's files are left alone: Pebble treats a failed WAL or MANIFEST
// write as fatal (Logger.Fatalf), by design, and its own tests cover it.
func storeOp(op errorfs.Op) bool { return !strings.Contains(op.Path, "/catalog") }

// faultInjector fails the store's operations numbered at (counting from 0),
// or every one from at on when forever is set; at < 0 counts only.
type faultInjector struct {
	at       int64
	forever  bool
	n        atomic.Int64
	injected atomic.Int64
}

func (f *faultInjector) MaybeError(op errorfs.Op) error {
	if !storeOp(op) {
		return nil
	}
	i := f.n.Add(1) - 1
	if f.at >= 0 && (i == f.at || f.forever && i > f.at) {
		f.injected.Add(1)
		return errorfs.ErrInjected
	}
	return nil
}

func (f *faultInjector) String() string {
	return fmt.Sprintf("fail op %d (forever %v)", f.at, f.forever)
}

// faultWorkload opens a store, puts packets across blob files, reads one,
// deletes one, puts again and closes, tolerating errors anywhere but
// recording in l what was acknowledged. Bytes a read returns must be right.
func faultWorkload(t *testing.T, fs vfs.FS, l *ledger) {
	db, err := Open("/db", &Options{FS: fs, BlobFileSize: 24 << 10})
	if err != nil {
		return
	}
	defer db.Close()
	spec := testSpec(format.DTypeF16, 2, 1, 8)
	fp := spec.Fingerprint()
	var ids []format.PacketID
	for i := range 4 {
		p := randPacket(spec, "ns", 40+120*(i%3), uint64(i)) // 4-20 KiB extents
		id := format.ComputePacketID(p.Namespace, fp, "", p.TokenIDs)
		l.set(id, p, putPending)
		if _, err := db.Put(context.Background(), p); err == nil {
			l.set(id, p, live)
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		readIfPossible(t, db, l.packets[id], id)
	}
	if len(ids) > 1 {
		l.set(ids[0], l.packets[ids[0]], deletePending)
		if err := db.Delete(context.Background(), "ns", fp, ids[0]); err == nil {
			l.set(ids[0], l.packets[ids[0]], deleted)
		}
	}
	p := randPacket(spec, "ns", 200, 77)
	id := format.ComputePacketID(p.Namespace, fp, "", p.TokenIDs)
	l.set(id, p, putPending)
	if _, err := db.Put(context.Background(), p); err == nil {
		l.set(id, p, live)
	}
}

// readIfPossible reads a packet; errors are allowed, wrong bytes are not.
func readIfPossible(t *testing.T, db *DB, p *Packet, id format.PacketID) {
	v, err := db.Get(context.Background(), p.Namespace, p.Model.Fingerprint(), id)
	if err != nil {
		return
	}
	defer v.Release()
	for l := range p.Layers {
		k, val, err := v.Layer(l)
		if err == nil && (!bytes.Equal(k, p.Layers[l].K) || !bytes.Equal(val, p.Layers[l].V)) {
			t.Fatalf("packet %s layer %d read back wrong under fault injection", id.Short(), l)
		}
	}
}

// TestFaultAtEveryOp fails each of the store's file operations in turn,
// once and then forever from that point: every failure surfaces as an
// error (nothing panics), and after reopening on the healthy file system
// everything acknowledged is there, exact, and nothing else is corrupt.
func TestFaultAtEveryOp(t *testing.T) {
	dry := &faultInjector{at: -1}
	faultWorkload(t, errorfs.Wrap(vfs.NewMem(), dry), newLedger())
	ops := dry.n.Load()
	t.Logf("%d store operations", ops)
	if ops < 30 {
		t.Fatalf("the dry run made only %d operations", ops)
	}
	for _, forever := range []bool{false, true} {
		for at := range ops {
			mem := vfs.NewMem()
			inj := &faultInjector{at: at, forever: forever}
			l := newLedger()
			faultWorkload(t, errorfs.Wrap(mem, inj), l)
			name := fmt.Sprintf("op %d of %d (forever %v)", at, ops, forever)
			if inj.injected.Load() == 0 {
				t.Fatalf("%s: no error was injected", name)
			}
			checkAfterFaults(t, mem, l, name)
		}
	}
}

func checkAfterFaults(t *testing.T, mem vfs.FS, l *ledger, name string) {
	t.Helper()
	db, err := Open("/db", &Options{FS: mem, BlobFileSize: 24 << 10})
	if err != nil {
		t.Fatalf("%s: reopen on the healthy file system: %v", name, err)
	}
	defer db.Close()
	checkAllHeaders(t, db, name)
	for id, st := range l.snapshot() {
		checkState(t, db, l.packets[id], id, st, name)
	}
	p := randPacket(testSpec(format.DTypeF16, 2, 1, 8), "ns", 50, 1000)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatalf("%s: Put after reopening: %v", name, err)
	}
	checkPacket(t, db, p, id)
}

// TestCatalogCommitFailure fails the catalog's WAL during a Put. Pebble
// treats that as fatal; the store turns it into ErrFailed instead of exiting
// the process. The Put's batch does not wait for the WAL (commitLogged), so
// the Put itself is acknowledged, its put record synced in the blob log;
// the failure surfaces from the background sync that follows: later writes
// fail fast, reads go on, Close returns the failure, and the reopened store
// holds what was acknowledged, the last Put applied again from its put
// record.
func TestCatalogCommitFailure(t *testing.T) {
	mem := vfs.NewMem()
	var on atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if on.Load() && strings.HasSuffix(op.Path, ".log") {
			return errorfs.ErrInjected
		}
		return nil
	})
	db, err := Open("/db", &Options{FS: errorfs.Wrap(mem, inj), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec(format.DTypeF16, 2, 1, 8)
	fp := spec.Fingerprint()
	p := randPacket(spec, "ns", 10, 1)
	synced := db.Stats().CatalogSyncs
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	// Let the first Put's background sync finish before the WAL fails, so
	// that the failure meets the second Put (else that sync meets it first
	// and the second Put already finds the catalog failed).
	for deadline := time.Now().Add(10 * time.Second); db.Stats().CatalogSyncs == synced; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first Put's background catalog sync never ran")
		}
	}
	on.Store(true)
	p2 := randPacket(spec, "ns", 10, 2)
	id2, err := db.Put(context.Background(), p2)
	if err != nil {
		t.Fatalf("Put with a failing WAL: %v, want it acknowledged (its put record is synced)", err)
	}
	waitSyncFailure(t, db)
	on.Store(false)
	if _, err := db.Put(context.Background(), randPacket(spec, "ns", 10, 3)); !errors.Is(err, ErrFailed) {
		t.Fatalf("Put after the failure: %v, want ErrFailed", err)
	}
	if err := db.Delete(context.Background(), "ns", fp, id); !errors.Is(err, ErrFailed) {
		t.Fatalf("Delete after the failure: %v, want ErrFailed", err)
	}
	checkPacket(t, db, p, id)
	if err := db.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close after the failure: %v, want ErrFailed", err)
	}
	db, err = Open("/db", &Options{FS: mem})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	checkPacket(t, db, p, id)
	checkPacket(t, db, p2, id2)
	// The first Put's batch too, if the WAL write its background sync made
	// had not been kept.
	if r := db.Stats().Reconciled; r.Inserted < 1 || r.Inserted > 2 {
		t.Fatalf("reopen reconciled %+v, want the acknowledged Puts the WAL lost inserted", r)
	}
	checkAllHeaders(t, db, "after a catalog failure")
	if _, err := db.Put(context.Background(), randPacket(spec, "ns", 10, 4)); err != nil {
		t.Fatalf("Put after reopening: %v", err)
	}
}

// waitSyncFailure waits for db's background catalog sync to report the
// failure it was kicked into (the syncer runs on its own goroutine).
func waitSyncFailure(t *testing.T, db *DB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for db.syncFailure() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the catalog's background sync never reported the failing WAL")
		}
		time.Sleep(time.Millisecond)
	}
	if err := db.syncFailure(); !errors.Is(err, ErrFailed) {
		t.Fatalf("background sync failure %v, want ErrFailed", err)
	}
}
