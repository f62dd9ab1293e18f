package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/kvstore/kvstore/format"
)

// mixedOpts are the options of the mixed workload's store.
func mixedOpts(fs vfs.FS) *Options {
	return &Options{FS: fs, BlobFileSize: 24 << 10, Logger: quiet}
}

// mixedWorkload puts packets across blob files, deletes some, puts a
// deleted one again, compacts every file with a dead byte, runs GC, and
// records in l what was acknowledged. With strict, any error fails the
// test; otherwise errors are tolerated (fault injection) but reads must
// never return wrong bytes.
func mixedWorkload(t *testing.T, fs vfs.FS, l *ledger, seed uint64, strict bool) {
	fail := func(err error) bool {
		if err != nil && strict {
			t.Fatalf("mixed workload (seed %d): %v", seed, err)
		}
		return err != nil
	}
	db, err := Open("/db", mixedOpts(fs))
	if fail(err) {
		return
	}
	defer func() {
		if err := db.Close(); strict && err != nil {
			t.Fatal(err)
		}
	}()
	rng := rand.New(rand.NewPCG(seed, 11))
	spec := testSpec(format.DTypeF16, 2, 1, 8)
	fp := spec.Fingerprint()
	var ids []format.PacketID
	put := func(p *Packet) {
		id := format.ComputePacketID(p.Namespace, fp, "", p.TokenIDs)
		l.set(id, p, putPending)
		if _, err := db.Put(context.Background(), p); !fail(err) {
			l.set(id, p, live)
			ids = append(ids, id)
		}
	}
	del := func(id format.PacketID) {
		l.set(id, l.packets[id], deletePending)
		if err := db.Delete(context.Background(), "ns", fp, id); !fail(err) {
			l.set(id, l.packets[id], deleted)
		}
	}
	for i := range 6 {
		put(randPacket(spec, "ns", 40+rng.IntN(400), seed*100+uint64(i))) // 2-26 KiB extents
		if i%2 == 1 && len(ids) > 1 {
			del(ids[len(ids)-2])
		}
	}
	if len(ids) > 0 {
		for _, id := range ids {
			readIfPossible(t, db, l.packets[id], id)
		}
		rep, err := db.Compact(context.Background(), CompactOptions{LiveRatio: 1})
		if !fail(err) && strict && len(rep.Rewritten) == 0 {
			t.Fatalf("mixed workload (seed %d): Compact rewrote nothing: %+v", seed, rep)
		}
	}
	if len(ids) > 2 { // a deleted packet comes back: same id, new extent
		if id := ids[0]; l.snapshot()[id] == deleted {
			put(l.packets[id])
		}
	}
	_, err = db.GC(context.Background(), GCOptions{})
	fail(err)
	put(randPacket(spec, "ns", 100, seed*100+99))
}

// checkRecovered opens fs and checks it against the ledger states:
// acknowledged puts exact, acknowledged deletes absent, every catalogued
// packet readable, Check without findings, and the store writable.
func checkRecovered(t *testing.T, fs vfs.FS, l *ledger, states map[format.PacketID]packetState, where string) {
	t.Helper()
	db, err := Open("/db", mixedOpts(fs))
	if err != nil {
		t.Fatalf("%s: reopen: %v", where, err)
	}
	defer db.Close()
	checkAllHeaders(t, db, where)
	for id, st := range states {
		checkState(t, db, l.packets[id], id, st, where)
	}
	rep, err := db.Check(context.Background(), CheckOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("%s: Check = %v, findings %v", where, err, rep.Findings)
	}
	p := randPacket(testSpec(format.DTypeF16, 2, 1, 8), "ns", 50, 1000)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatalf("%s: Put after recovery: %v", where, err)
	}
	checkPacket(t, db, p, id)
}

// TestReliabilityFaultsMixed fails each of the store's file operations of
// the mixed workload (put, delete, re-put, compact, GC) in turn, once and
// then forever: nothing panics, reads never return wrong bytes, and after
// reopening on the healthy file system nothing acknowledged is lost,
// nothing acknowledged as deleted is back, and Check finds nothing.
func TestReliabilityFaultsMixed(t *testing.T) {
	const seed = 3
	dry := &faultInjector{at: -1}
	mixedWorkload(t, errorfs.Wrap(vfs.NewMem(), dry), newLedger(), seed, true)
	ops := dry.n.Load()
	if ops < 40 {
		t.Fatalf("the dry run made only %d operations", ops)
	}
	runs := 0
	for _, forever := range []bool{false, true} {
		for at := range ops {
			mem := vfs.NewMem()
			inj := &faultInjector{at: at, forever: forever}
			l := newLedger()
			mixedWorkload(t, errorfs.Wrap(mem, inj), l, seed, false)
			if inj.injected.Load() == 0 {
				t.Fatalf("op %d: no error was injected", at)
			}
			checkRecovered(t, mem, l, l.snapshot(), fmt.Sprintf("op %d of %d (forever %v)", at, ops, forever))
			runs++
		}
	}
	t.Logf("mixed workload: %d store operations, %d fault runs (each op once, then forever), 0 acknowledged writes lost, Check clean", ops, runs)
}

// TestReliabilityCrashMixed crashes the mixed workload at every k-th write
// (CrashClone before the write), keeping 0, 50 and 100% of unsynced data,
// for several seeds: every clone opens, keeps every acknowledged put
// exact, has no acknowledged delete back, reads every catalogued packet
// (no hole where unsynced data was lost) and Check finds nothing.
func TestReliabilityCrashMixed(t *testing.T) {
	seeds := pick(3, 8)
	total := 0
	for seed := range uint64(seeds) {
		dry := &writeCounter{}
		mixedWorkload(t, errorfs.Wrap(vfs.NewMem(), dry), newLedger(), seed, true)
		k := max(1, int(dry.n.Load())/pick(30, 400))
		mem := vfs.NewCrashableMem()
		l := newLedger()
		rng := rand.New(rand.NewPCG(seed, 5))
		var mu sync.Mutex
		var clones []crashClone
		var writes atomic.Int64
		hook := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if op.Kind != errorfs.OpFileWrite && op.Kind != errorfs.OpFileWriteAt {
				return nil
			}
			if n := writes.Add(1); n%int64(k) != 0 {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			l.frozen(func(states map[format.PacketID]packetState) {
				for _, pct := range []int{0, 50, 100} {
					fs := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))})
					clones = append(clones, crashClone{fmt.Sprintf("seed %d clone %d (%d%%)", seed, len(clones), pct), fs, states})
				}
			})
			return nil
		})
		mixedWorkload(t, errorfs.Wrap(mem, hook), l, seed, true)
		for _, c := range clones {
			checkRecovered(t, c.fs, l, c.states, c.name)
		}
		t.Logf("seed %d: %d writes, a crash every %d: %d clones", seed, writes.Load(), k, len(clones))
		total += len(clones)
	}
	t.Logf("mixed crash campaign: %d seeds, %d crash clones at 0/50/100%% unsynced data, all recovered with Check clean", seeds, total)
}

// writeCounter counts file writes.
type writeCounter struct{ n atomic.Int64 }

func (w *writeCounter) MaybeError(op errorfs.Op) error {
	if op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt {
		w.n.Add(1)
	}
	return nil
}

func (w *writeCounter) String() string { return "count writes" }
