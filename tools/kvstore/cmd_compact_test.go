package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

func TestCompact(t *testing.T) {
	// Blob files seal after two packets: ids 0 and 1 in 000001, id 2 in
	// the active 000002, which compaction leaves alone.
	dir, ids := testStoreWith(t, &store.Options{BlobFileSize: format.BlobHeaderSize + 2*format.Alignment})
	kv(t, "--dir", dir, "rm", ids[0].String()).want(t, exitOK)
	var out compactOutput
	r := kv(t, "--dir", dir, "--json", "compact", "--ratio", "1").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Rewritten) != 1 || out.Rewritten[0] != 1 || out.Extents != 1 || out.BytesReclaimed == 0 {
		t.Fatalf("compact: %+v", out)
	}
	var st statOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "stat").want(t, exitOK).stdout), &st); err != nil {
		t.Fatal(err)
	}
	// What is dead is the rm's tombstone extent, in the active file.
	if st.Packets != 2 || st.DeadBytes != format.Alignment {
		t.Fatalf("stat after compact: %+v", st)
	}
	kv(t, "--dir", dir, "verify").want(t, exitOK)
	kv(t, "--dir", dir, "check").want(t, exitOK)
	kv(t, "--dir", dir, "inspect", ids[1].String()).want(t, exitOK)
	// The second time at most the file holding the rm's tombstone (dead
	// bytes) is left to rewrite; nothing the third.
	out = compactOutput{}
	r = kv(t, "--dir", dir, "--json", "compact", "--ratio", "1").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Rewritten) > 1 || out.Extents > 1 {
		t.Fatalf("second compact: %v %+v", err, out)
	}
	out = compactOutput{}
	r = kv(t, "--dir", dir, "--json", "compact", "--ratio", "1").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Rewritten) != 0 {
		t.Fatalf("third compact: %v %+v", err, out)
	}
}

// compact --ratio 1 on a store whose only file is the active one rewrites
// nothing, and says so and why instead of printing nothing.
func TestCompactReportsActive(t *testing.T) {
	dir, ids := testStore(t)
	kv(t, "--dir", dir, "rm", ids[0].String()).want(t, exitOK)
	var out compactOutput
	r := kv(t, "--dir", dir, "--json", "compact", "--ratio", "1").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Rewritten) != 0 || !strings.Contains(out.Skipped["000001"], "active") {
		t.Fatalf("compact of the active file: %+v", out)
	}
	r = kv(t, "--dir", dir, "compact", "--ratio", "1").want(t, exitOK)
	if !strings.Contains(r.stdout, "skipped 000001.blob: the active file") {
		t.Fatalf("text output does not say what was skipped:\n%s", r.stdout)
	}
	r = kv(t, "--dir", dir, "compact", "--files", "1").want(t, exitOK)
	if !strings.Contains(r.stdout, "skipped 000001.blob: the active file") {
		t.Fatalf("--files of the active file:\n%s", r.stdout)
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
// to rewrite.
func TestCompactLeft(t *testing.T) {
	files := []store.BlobFileInfo{
		{Num: 1, LiveBytes: 10, DeadBytes: 90, Sealed: true}, // rewritten
		{Num: 2, LiveBytes: 90, DeadBytes: 10, Sealed: true}, // ratio too high
		{Num: 3, LiveBytes: 50, DeadBytes: 0, Sealed: true},  // nothing dead
		{Num: 4, LiveBytes: 1, DeadBytes: 50, Sealed: false}, // active
	}
	left, err := compactLeft(files, &store.CompactOptions{LiveRatio: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := left["000001"]; ok || len(left) != 3 || !strings.Contains(left["000002"], "90.0%") ||
		left["000003"] != "no dead bytes" || !strings.Contains(left["000004"], "active") {
		t.Fatalf("left: %q", left)
	}
	left, err = compactLeft(files, &store.CompactOptions{LiveRatio: 0.5, Files: []uint32{2}})
	if err != nil || len(left) != 0 {
		t.Fatalf("--files 2: %q %v", left, err)
	}
	if _, err := compactLeft(files, &store.CompactOptions{Files: []uint32{5}}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("--files 5: %v", err)
	}
}
