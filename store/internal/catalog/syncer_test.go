package catalog

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// unsyncedSet commits key -> value without waiting for the WAL.
func unsyncedSet(t *testing.T, c *Catalog, key, value string) {
	t.Helper()
	b := c.DB.NewBatch()
	defer b.Close()
	_ = b.Set([]byte(key), []byte(value), nil)
	if err := c.CommitUnsynced(b); err != nil {
		t.Fatal(err)
	}
}

// has reports whether the catalog on fs holds key.
func has(t *testing.T, fs vfs.FS, key string) bool {
	t.Helper()
	c, err := openMem(t, fs, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ok, err := c.Has([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestCommitUnsyncedNeedsASync: an unsynced commit is visible at once but
// not durable (a crash clone keeping no unsynced data lacks it) until a
// sync, the syncer's or SyncWAL's, covers it.
func TestCommitUnsyncedNeedsASync(t *testing.T) {
	mem := vfs.NewCrashableMem()
	c, err := openMem(t, mem, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	unsyncedSet(t, c, "a", "1")
	if ok, err := c.Has([]byte("a")); !ok || err != nil {
		t.Fatalf("an unsynced commit is not visible: %v %v", ok, err)
	}
	if has(t, mem.CrashClone(vfs.CrashCloneCfg{}), "a") {
		t.Fatal("an unsynced commit survived a crash that kept no unsynced data: the test cannot tell a sync happened")
	}
	if err := c.SyncWAL(); err != nil {
		t.Fatal(err)
	}
	if !has(t, mem.CrashClone(vfs.CrashCloneCfg{}), "a") {
		t.Fatal("SyncWAL did not make the earlier unsynced commit durable")
	}

	var syncs atomic.Int64
	s := c.StartSyncer(func(time.Duration) { syncs.Add(1) })
	for i := range 50 {
		unsyncedSet(t, c, fmt.Sprintf("k%02d", i), "v")
		s.Kick()
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load(); n < 1 || n > 50 {
		t.Fatalf("%d syncs for 50 kicks, want 1 to 50", n)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	for i := range 50 {
		if !has(t, crashed, fmt.Sprintf("k%02d", i)) {
			t.Fatalf("k%02d lost: Stop did not wait for the sync its kick asked for", i)
		}
	}
	s.Kick() // after Stop: nothing, no panic
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// TestSyncerRemembersFailure: a sync the WAL fails is remembered wrapping
// ErrFailed, and returned by Stop; the catalog's Close fails too.
func TestSyncerRemembersFailure(t *testing.T) {
	var on atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if on.Load() && strings.HasSuffix(op.Path, ".log") {
			return errorfs.ErrInjected
		}
		return nil
	})
	c, err := openMem(t, errorfs.Wrap(vfs.NewMem(), inj), false)
	if err != nil {
		t.Fatal(err)
	}
	s := c.StartSyncer(nil)
	unsyncedSet(t, c, "a", "1")
	on.Store(true)
	s.Kick()
	deadline := time.Now().Add(10 * time.Second)
	for s.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := s.Err(); !errors.Is(err, ErrFailed) {
		t.Fatalf("syncer error %v, want ErrFailed", err)
	}
	if err := s.Stop(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Stop: %v, want ErrFailed", err)
	}
	if err := c.Close(); err == nil {
		t.Fatal("Close after the WAL failed returned nil")
	}
}
