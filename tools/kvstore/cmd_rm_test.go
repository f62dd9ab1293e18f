package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRm(t *testing.T) {
	dir, ids := testStore(t)
	// An unknown id among known ones deletes nothing.
	kv(t, "--dir", dir, "rm", ids[0].String(), "00000000").want(t, exitFail)
	var ls lsOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "ls").want(t, exitOK).stdout), &ls); err != nil || len(ls.Packets) != 3 {
		t.Fatalf("after a failed rm: %v, %d packets", err, len(ls.Packets))
	}
	r := kv(t, "--dir", dir, "rm", ids[0].String()[:12], ids[2].String(), ids[0].String()).want(t, exitOK)
	if strings.Count(r.stdout, "removed ") != 2 || !strings.Contains(r.stdout, "removed "+ids[0].String()) ||
		!strings.Contains(r.stdout, "removed "+ids[2].String()) {
		t.Fatal(r.stdout)
	}
	ls = lsOutput{}
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "ls").want(t, exitOK).stdout), &ls); err != nil ||
		len(ls.Packets) != 1 || ls.Packets[0].ID != ids[1].String() {
		t.Fatalf("after rm: %v, %+v", err, ls)
	}
	kv(t, "--dir", dir, "rm", ids[0].String()).want(t, exitFail) // gone
	kv(t, "--dir", dir, "check").want(t, exitOK)
}
