package store

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/kvstore/kvstore/format"
)

// noTables fails, once on, every table the catalog creates with ENOSPC:
// its flushes fail, and Pebble retries them forever, as on a full disk.
type noTables struct{ on atomic.Bool }

func (n *noTables) MaybeError(op errorfs.Op) error {
	if n.on.Load() && op.Kind == errorfs.OpCreate && strings.HasSuffix(op.Path, ".sst") {
		return &os.PathError{Op: "create", Path: op.Path, Err: syscall.ENOSPC}
	}
	return nil
}

func (n *noTables) String() string { return "no tables" }

// TestCloseCatalogStalled: the catalog's flushes fail and its memtables
// fill up to Pebble's stall threshold, and every packet was read, so the
// access statistics to save are a batch larger than half a memtable (one
// that Pebble gives a memtable of its own, so it waits on the stall).
// Close used to block there for ever; it must return within 5 s, having
// dropped the statistics, and the store reopens with every packet.
func TestCloseCatalogStalled(t *testing.T) {
	mem := vfs.NewMem()
	inj := &noTables{}
	fs := errorfs.Wrap(mem, inj)
	const m = 1 << 20
	o := &Options{FS: fs, Logger: quiet, CatalogMemTableSize: m, AccessFlushInterval: -1}
	db, err := Open("/db", o)
	if err != nil {
		t.Fatal(err)
	}
	inj.on.Store(true)
	spec := testSpec(format.DTypeF16, 1, 1, 8)
	ns := strings.Repeat("n", format.MaxNameLen)
	var ids []format.PacketID
	// Up to the stall threshold, then 100 more: the last memtable, just
	// started, has room for about 400 of these Puts.
	for n, more := 0, 100; more > 0; n++ {
		if db.cat.DB.Metrics().MemTable.Size >= 2*m {
			more--
		}
		id, err := db.Put(context.Background(), randPacket(spec, ns, 8, uint64(n)))
		if err != nil {
			t.Fatalf("Put %d: %v", n, err)
		}
		ids = append(ids, id)
	}
	if batch := len(ids) * (len(ns) + 60); batch <= m/2 {
		t.Fatalf("the access statistics of %d packets are about %d bytes, not a large batch", len(ids), batch)
	}
	for _, id := range ids {
		v, err := db.Get(context.Background(), ns, spec.Fingerprint(), id)
		if err != nil {
			t.Fatal(err)
		}
		v.Release()
	}
	t.Logf("%d packets, memtables %d bytes in %d", len(ids), db.cat.DB.Metrics().MemTable.Size, db.cat.DB.Metrics().MemTable.Count)
	d, ok := returnsWithin(5*time.Second, func() { err = db.Close() })
	if !ok {
		t.Fatal("Close with the catalog stalled did not return within 5 s")
	}
	t.Logf("Close took %v: %v", d.Round(time.Millisecond), err)
	inj.on.Store(false)
	db, err = Open("/db", o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if st := db.Stats(); st.Packets != uint64(len(ids)) {
		t.Fatalf("reopened: %d packets, want %d", st.Packets, len(ids))
	}
}
