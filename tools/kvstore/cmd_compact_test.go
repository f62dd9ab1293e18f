package main

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

func TestCompact(t *testing.T) {
	// Blob files seal after two packets: ids 0 and 1 in 000001, id 2 in
	// the active 000002, where the rm's tombstone goes too: both have dead
	// bytes, so compact --ratio 1 rolls the active file and rewrites both.
	dir, ids := testStoreWith(t, &store.Options{BlobFileSize: format.BlobHeaderSize + 2*format.Alignment})
	kv(t, "--dir", dir, "rm", ids[0].String()).want(t, exitOK)
	var out compactOutput
	r := kv(t, "--dir", dir, "--json", "compact", "--ratio", "1").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Rewritten, []uint32{1, 2}) || out.Extents != 2 || out.BytesReclaimed == 0 || len(out.Skipped) != 0 {
		t.Fatalf("compact: %+v", out)
	}
	var st statOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "stat").want(t, exitOK).stdout), &st); err != nil {
		t.Fatal(err)
	}
	if st.Packets != 2 || st.DeadBytes != 0 {
		t.Fatalf("stat after compact: %+v", st)
	}
	kv(t, "--dir", dir, "verify").want(t, exitOK)
	kv(t, "--dir", dir, "check").want(t, exitOK)
	kv(t, "--dir", dir, "inspect", ids[1].String()).want(t, exitOK)
	out = compactOutput{}
	r = kv(t, "--dir", dir, "--json", "compact", "--ratio", "1").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Rewritten) != 0 {
		t.Fatalf("second compact: %v %+v", err, out)
	}
}

// compact of a store whose only file is the active one rolls it and
// rewrites it, whether chosen by --ratio or named by --files: deleted
// data comes back without waiting for the file to fill or a restart.
func TestCompactRollsActive(t *testing.T) {
	for _, args := range [][]string{{"--ratio", "1"}, {"--files", "1"}} {
		t.Run(args[0], func(t *testing.T) {
			dir, ids := testStore(t)
			kv(t, "--dir", dir, "rm", ids[0].String()).want(t, exitOK)
			var dry compactOutput
			r := kv(t, append([]string{"--dir", dir, "--json", "compact", "--dry-run"}, args...)...).want(t, exitOK)
			if err := json.Unmarshal([]byte(r.stdout), &dry); err != nil || !slices.Equal(dry.Rewritten, []uint32{1}) {
				t.Fatalf("dry run: %v %+v", err, dry)
			}
			r = kv(t, append([]string{"--dir", dir, "compact"}, args...)...).want(t, exitOK)
			if !strings.Contains(r.stdout, "rewrote 1 files into 1") || strings.Contains(r.stdout, "skipped") {
				t.Fatalf("compact of the active file:\n%s", r.stdout)
			}
			var st statOutput
			if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "stat").want(t, exitOK).stdout), &st); err != nil {
				t.Fatal(err)
			}
			if st.Packets != 2 || st.DeadBytes != 0 {
				t.Fatalf("stat after compact: %+v", st)
			}
			kv(t, "--dir", dir, "check").want(t, exitOK)
			kv(t, "--dir", dir, "inspect", ids[1].String()).want(t, exitOK)
		})
	}
}

// A --files number the store does not hold is an error, not ignored.
func TestCompactUnknownFile(t *testing.T) {
	dir, _ := testStore(t)
	r := kv(t, "--dir", dir, "compact", "--files", "1,42").want(t, exitFail)
	if !strings.Contains(r.stderr, "no blob file 000042") {
		t.Fatalf("stderr: %q", r.stderr)
	}
}

// compactLeft gives every file it leaves a reason, and none to the files
// to rewrite, the active one included (Compact rolls it).
func TestCompactLeft(t *testing.T) {
	files := []store.BlobFileInfo{
		{Num: 1, LiveBytes: 10, DeadBytes: 90, Sealed: true}, // rewritten
		{Num: 2, LiveBytes: 90, DeadBytes: 10, Sealed: true}, // ratio too high
		{Num: 3, LiveBytes: 50, DeadBytes: 0, Sealed: true},  // nothing dead
		{Num: 4, LiveBytes: 1, DeadBytes: 50, Sealed: false}, // active: rolled and rewritten
		{Num: 5, LiveBytes: 9, DeadBytes: 1, Sealed: false},  // active, ratio too high
	}
	left, err := compactLeft(files, &store.CompactOptions{LiveRatio: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	_, one := left["000001"]
	_, four := left["000004"]
	if one || four || len(left) != 3 || !strings.Contains(left["000002"], "90.0%") ||
		left["000003"] != "no dead bytes" || !strings.Contains(left["000005"], "90.0%") {
		t.Fatalf("left: %q", left)
	}
	left, err = compactLeft(files, &store.CompactOptions{LiveRatio: 0.5, Files: []uint32{2}})
	if err != nil || len(left) != 0 {
		t.Fatalf("--files 2: %q %v", left, err)
	}
	if _, err := compactLeft(files, &store.CompactOptions{Files: []uint32{9}}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("--files 9: %v", err)
	}
}
