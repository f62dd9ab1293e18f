package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/store"
)

// A store that filled its disk (a real 40 MiB tmpfs) is emptied with the
// CLI: ls opens it at once, rm of every packet and gc free the room, and a
// Put works again. The dry runs write nothing.
func TestFullStoreEmptiedWithCLI(t *testing.T) {
	dir := testenv.SmallFS(t, 40<<20) + "/store"
	ids := fillStore(t, dir, &store.Options{BlobFileSize: 4 << 20})

	start := time.Now()
	var ls lsOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "ls").want(t, exitOK).stdout), &ls); err != nil || len(ls.Packets) != len(ids) {
		t.Fatalf("ls of the full store: %v, %d packets, want %d", err, len(ls.Packets), len(ids))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("ls of a full store took %v", d)
	}
	args := []string{"--dir", dir, "rm"}
	for _, id := range ids {
		args = append(args, id.String())
	}
	kv(t, args...).want(t, exitOK)

	var dry gcOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "gc", "--dry-run").want(t, exitOK).stdout), &dry); err != nil || !dry.DryRun {
		t.Fatalf("gc --dry-run: %v, %+v", err, dry)
	}
	var gc gcOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "gc").want(t, exitOK).stdout), &gc); err != nil || gc.BytesReclaimed == 0 {
		t.Fatalf("gc: %v, %+v", err, gc)
	}
	if dry.BytesReclaimed != gc.BytesReclaimed || len(dry.FilesRemoved) != len(gc.FilesRemoved) {
		t.Fatalf("gc --dry-run said %+v, gc did %+v", dry, gc)
	}
	kv(t, "--dir", dir, "check").want(t, exitOK)

	db, err := store.Open(dir, &store.Options{BlobFileSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if st := db.Stats(); st.Packets != 0 || st.SpaceHeld {
		t.Fatalf("after rm and gc: %d packets, space held %v", st.Packets, st.SpaceHeld)
	}
	if _, err := db.Put(context.Background(), tinyPacket("ns", 1, 4096)); err != nil {
		t.Fatalf("Put after the CLI freed the disk: %v", err)
	}
}

// compact --dry-run lists what it would rewrite and changes nothing.
func TestCompactDryRun(t *testing.T) {
	dir, ids := testStoreWith(t, &store.Options{BlobFileSize: 8192})
	kv(t, "--dir", dir, "rm", ids[0].String(), ids[1].String()).want(t, exitOK)
	before := kv(t, "--dir", dir, "--json", "stat").want(t, exitOK).stdout
	var out compactOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "compact", "--ratio", "1", "--dry-run").want(t, exitOK).stdout), &out); err != nil ||
		!out.DryRun || len(out.Rewritten) == 0 {
		t.Fatalf("compact --dry-run: %v, %+v", err, out)
	}
	if after := kv(t, "--dir", dir, "--json", "stat").want(t, exitOK).stdout; after != before {
		t.Fatalf("compact --dry-run changed the store:\n%s\n%s", before, after)
	}
	if r := kv(t, "--dir", dir, "compact", "--ratio", "1", "--dry-run").want(t, exitOK); !strings.Contains(r.stdout, "dry run: would rewrite") {
		t.Fatalf("text: %q", r.stdout)
	}
}

// A store that filled its disk (a real 64 MiB tmpfs, the store's default
// options: Put refused with ErrNoSpace) is emptied by half and refilled
// with the CLI alone: rm of every other packet, gc and compact give the
// room back (the files half dead are rewritten, the active one rolled
// first: nothing dead is left on the disk), then import of a packet
// exported before works, check finds the store clean, and it holds no new
// data back.
func TestFullStoreRefilledWithCLI(t *testing.T) {
	dir := testenv.SmallFS(t, 64<<20) + "/store"
	ids := fillStore(t, dir, nil)
	if len(ids) < 20 {
		t.Fatalf("only %d packets fill the disk", len(ids))
	}

	file := t.TempDir() + "/p.safetensors"
	kv(t, "--dir", dir, "export", ids[0].String(), file).want(t, exitOK)
	var full statOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "stat").want(t, exitOK).stdout), &full); err != nil {
		t.Fatal(err)
	}
	args := []string{"--dir", dir, "rm"}
	for i := 0; i < len(ids); i += 2 {
		args = append(args, ids[i].String())
	}
	kv(t, args...).want(t, exitOK)
	var gc gcOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "gc").want(t, exitOK).stdout), &gc); err != nil {
		t.Fatal(err)
	}
	// Every file is about half dead: a ratio above a half rewrites them.
	var compact compactOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "compact", "--ratio", "0.75").want(t, exitOK).stdout), &compact); err != nil {
		t.Fatal(err)
	}
	t.Logf("gc: %+v; compact: rewrote %v, reclaimed %d, skipped %v", gc, compact.Rewritten, compact.BytesReclaimed, compact.Skipped)
	if len(compact.Rewritten) == 0 {
		t.Fatalf("compact after rm of half rewrote nothing: skipped %v", compact.Skipped)
	}
	for n, why := range compact.Skipped {
		if strings.Contains(why, "no room") {
			t.Fatalf("compact after rm of half skipped %s: %s", n, why)
		}
	}
	var st statOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "stat").want(t, exitOK).stdout), &st); err != nil {
		t.Fatal(err)
	}
	// What rm killed (its tombstones included) is gone from the disk, not
	// only from the catalog: about half the blob bytes are left, none dead.
	if st.DeadBytes != 0 || st.LiveBytes > full.LiveBytes*6/10 {
		t.Fatalf("after rm of half, gc and compact: live %d of %d, dead %d; want about half left, nothing dead", st.LiveBytes, full.LiveBytes, st.DeadBytes)
	}
	var imp importOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "import", "--ns", "again", file).want(t, exitOK).stdout), &imp); err != nil || imp.Stored {
		t.Fatalf("import after the cleanup: %v %+v", err, imp)
	}
	kv(t, "--dir", dir, "check").want(t, exitOK)
	db, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if s := db.Stats(); s.Packets != uint64(len(ids)/2+1) || s.SpaceHeld {
		t.Fatalf("after the refill: %d packets, held %v; want %d, not held", s.Packets, s.SpaceHeld, len(ids)/2+1)
	}
}

// fillStore creates a store in dir with o and Puts 4,096-token tiny
// packets until one fails with ErrNoSpace (any other error, or a disk that
// holds more than 1,000 of them, fails t), closes it and returns the ids
// stored.
func fillStore(t *testing.T, dir string, o *store.Options) []format.PacketID {
	t.Helper()
	db, err := store.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	var ids []format.PacketID
	for n := 1; ; n++ {
		id, err := db.Put(context.Background(), tinyPacket("ns", n, 4096))
		if errors.Is(err, store.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatalf("Put %d: %v", n, err)
		}
		ids = append(ids, id)
		if n > 1000 {
			t.Fatalf("the disk of %s never filled", dir)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("disk full after %d packets", len(ids))
	return ids
}
