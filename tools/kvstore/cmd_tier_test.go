package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/internal/s3test"
)

// The tier verbs against a real versitygw: push a store's packets, list
// them, pull them into another store (byte for byte, checked by verify
// and by comparing the chunks), verify the tier; pushing again creates
// nothing.
func TestTierVerbs(t *testing.T) {
	srv := s3test.Start(t)
	srv.CreateBucket(t, "kvstore-tier")
	t.Setenv("KVSTORE_TIER_ENDPOINT", srv.Endpoint)
	t.Setenv("KVSTORE_TIER_BUCKET", "kvstore-tier")
	t.Setenv("KVSTORE_TIER_ACCESS_KEY", srv.AccessKey)
	t.Setenv("KVSTORE_TIER_SECRET_KEY", srv.SecretKey)

	dir, ids := testStore(t)
	kv(t, "tier", "status").want(t, exitOK)
	var pushed tierPushOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "tier", "push").want(t, exitOK).stdout), &pushed); err != nil ||
		len(pushed.Created) != 3 || len(pushed.Present) != 0 {
		t.Fatalf("push: %v, %+v", err, pushed)
	}
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "--json", "tier", "push").want(t, exitOK).stdout), &pushed); err != nil ||
		len(pushed.Created) != 0 || len(pushed.Present) != 3 {
		t.Fatalf("second push: %v, %+v", err, pushed)
	}
	h := header(t, dir, ids[0]) // namespace "a", with ids[1]
	fp := h.Model.String()
	var ls struct{ Packets []string }
	if err := json.Unmarshal([]byte(kv(t, "--json", "tier", "ls", "--ns", "a", "--model", fp).want(t, exitOK).stdout), &ls); err != nil || len(ls.Packets) != 2 {
		t.Fatalf("tier ls: %v, %+v", err, ls)
	}
	dst := t.TempDir()
	kv(t, "--dir", dst, "--create", "tier", "pull", "--ns", "a", "--model", fp, ids[0].String(), ids[1].String()).want(t, exitOK)
	for _, id := range ids[:2] {
		a, b := header(t, dir, id), header(t, dst, id)
		if string(packetBytes(t, dir, a)) != string(packetBytes(t, dst, b)) {
			t.Fatalf("packet %s pulled from the tier differs", id.Short())
		}
	}
	kv(t, "--dir", dst, "verify").want(t, exitOK)
	r := kv(t, "tier", "verify", "--ns", "a", "--model", fp).want(t, exitOK)
	if !strings.Contains(r.stdout, "checked 2 packets, 0 bad") {
		t.Fatalf("tier verify: %q", r.stdout)
	}
	// A flipped byte in one stored part: tier verify names one bad packet.
	var part string
	_ = filepath.WalkDir(filepath.Join(srv.Dir, "kvstore-tier"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && part == "" && filepath.Base(p) != "header" && strings.Contains(p, ids[0].String()) {
			part = p
		}
		return nil
	})
	b, err := os.ReadFile(part)
	if part == "" || err != nil || len(b) == 0 {
		t.Fatalf("no part of %s found under %s: %v", ids[0].Short(), srv.Dir, err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(part, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r = kv(t, "tier", "verify", "--ns", "a", "--model", fp).want(t, exitFail)
	if !strings.Contains(r.stdout, "checked 2 packets, 1 bad") || !strings.Contains(r.stdout, "bad "+ids[0].String()) {
		t.Fatalf("tier verify of a damaged part: %q", r.stdout)
	}
	kv(t, "verify", "--tier", "--ns", "a", "--model", fp).want(t, exitFail) // the same check as verify --tier
	kv(t, "tier", "ls", "--ns", "a", "--model", "abc").want(t, exitUsage)
	kv(t, "tier", "status", "--endpoint", "").want(t, exitUsage)
}
