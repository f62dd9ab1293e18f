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
