package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

func TestGC(t *testing.T) {
	// Two packets per sealed file: 0 and 1 in 000001, 2 in the active 000002.
	dir, ids := testStoreWith(t, &store.Options{BlobFileSize: format.BlobHeaderSize + 2*format.Alignment})
	// An orphan: a blob file nothing in the catalog names.
	orphan := filepath.Join(dir, "blobs", "000009.blob")
	if err := os.WriteFile(orphan, make([]byte, format.BlobHeaderSize), 0o644); err != nil {
		t.Fatal(err)
	}
	var chk checkOutput
	r := kv(t, "--dir", dir, "--json", "check").want(t, exitOK) // garbage is not a finding
	if err := json.Unmarshal([]byte(r.stdout), &chk); err != nil || len(chk.Garbage) == 0 {
		t.Fatalf("check lists no garbage: %v %+v", err, chk)
	}
	kv(t, "--dir", dir, "rm", ids[0].String(), ids[1].String()).want(t, exitOK)

	var out gcOutput
	r = kv(t, "--dir", dir, "--json", "gc").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.FilesRemoved) != 2 || out.BytesReclaimed == 0 {
		t.Fatalf("gc: %+v", out)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("orphan still there: %v", err)
	}
	chk = checkOutput{}
	r = kv(t, "--dir", dir, "--json", "check").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &chk); err != nil || chk.Packets != 1 || chk.Files != 1 {
		t.Fatalf("check after gc: %v %+v", err, chk)
	}
	kv(t, "--dir", dir, "verify").want(t, exitOK)
	if r := kv(t, "--dir", dir, "gc").want(t, exitOK); !strings.Contains(r.stdout, "removed 0 files") {
		t.Fatalf("second gc: %s", r.stdout)
	}
}
