package main

import (
	"encoding/json"
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
