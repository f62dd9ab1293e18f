package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A store whose catalog directory is gone is refused by every verb;
// recover rebuilds it from the blob files: the live packets come back,
// the deleted one stays deleted, the old catalog is kept aside.
func TestRecover(t *testing.T) {
	dir, ids := testStore(t)
	kv(t, "--dir", dir, "rm", ids[1].String()).want(t, exitOK)
	cat := filepath.Join(dir, "catalog")
	if err := os.Rename(cat, filepath.Join(t.TempDir(), "gone")); err != nil {
		t.Fatal(err)
	}
	kv(t, "--dir", dir, "ls").want(t, exitFail)
	var rep recoverOutput
	r := kv(t, "--dir", dir, "--json", "recover").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %q", err, r.stdout)
	}
	if rep.Inserted != 3 || rep.Deleted != 1 || len(rep.Problems) != 0 || len(rep.GoneFiles) != 0 {
		t.Fatalf("recover: %+v", rep)
	}
	var ls lsOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "ls").want(t, exitOK).stdout), &ls); err != nil || len(ls.Packets) != 2 {
		t.Fatalf("after recover: %v, %+v", err, ls)
	}
	for _, p := range ls.Packets {
		if p.ID == ids[1].String() {
			t.Fatalf("the deleted packet %s came back", p.ID)
		}
	}
	kv(t, "--dir", dir, "check").want(t, exitOK)
	kv(t, "--dir", dir, "verify").want(t, exitOK)

	// A second recover moves the rebuilt catalog aside and rebuilds the same.
	r = kv(t, "--dir", dir, "recover").want(t, exitOK)
	if !strings.Contains(r.stdout, "moved the old catalog to ") || !strings.Contains(r.stdout, "run check next") {
		t.Fatalf("recover text: %q", r.stdout)
	}
	kv(t, "--dir", dir, "recover", "extra").want(t, exitUsage)
	kv(t, "--dir", t.TempDir(), "recover").want(t, exitFail) // no store there
}

// A store whose FORMAT files are both damaged is refused by every verb,
// naming kvstore recover; recover --format-only writes them again from
// the blob files' headers and keeps the catalog: every packet is still
// listed, nothing is moved aside. Plain recover reports the FORMAT files
// it found good.
func TestRecoverFormatOnly(t *testing.T) {
	dir, ids := testStore(t)
	for _, name := range []string{"FORMAT", "FORMAT.copy"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("damaged"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := kv(t, "--dir", dir, "ls").want(t, exitFail)
	if !strings.Contains(r.stderr, "kvstore recover --format-only") {
		t.Fatalf("ls of a store without a good FORMAT names no remedy: %q", r.stderr)
	}
	var rep formatOutput
	r = kv(t, "--dir", dir, "--json", "recover", "--format-only").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %q", err, r.stdout)
	}
	if !rep.Rewritten || !rep.FromBlobs || rep.BlobHeaders != 1 || len(rep.Found) != 2 || rep.Version == "" {
		t.Fatalf("recover --format-only: %+v", rep)
	}
	var ls lsOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "ls").want(t, exitOK).stdout), &ls); err != nil || len(ls.Packets) != len(ids) {
		t.Fatalf("after recover --format-only: %v, %+v", err, ls)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "catalog.lost-*")); len(m) != 0 {
		t.Fatalf("recover --format-only moved the catalog aside: %v", m)
	}
	r = kv(t, "--dir", dir, "recover", "--format-only").want(t, exitOK)
	if !strings.Contains(r.stdout, "FORMAT: format "+rep.Version+", good") {
		t.Fatalf("recover --format-only of a good store: %q", r.stdout)
	}
	r = kv(t, "--dir", dir, "recover").want(t, exitOK)
	if !strings.Contains(r.stdout, "FORMAT: format "+rep.Version+", good") || !strings.Contains(r.stdout, "run check next") {
		t.Fatalf("recover text: %q", r.stdout)
	}
}
