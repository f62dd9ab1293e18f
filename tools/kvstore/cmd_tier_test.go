package main

import (
	"encoding/json"
	"io/fs"
	"net"
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
	// pull takes unique prefixes of the ids the tier holds, as the docs say.
	kv(t, "--dir", dst, "--create", "tier", "pull", "--ns", "a", "--model", fp, ids[0].String()[:8], ids[1].String()).want(t, exitOK)
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

	// Errors name what to fix, never the SDK's "https response error".
	r = kv(t, "--dir", dst, "tier", "pull", "--ns", "a", "--model", fp, "ffff").want(t, exitFail)
	if !strings.Contains(r.stderr, "holds no packet ffff") {
		t.Errorf("pull of an unknown prefix: %q", r.stderr)
	}
	for _, c := range []struct {
		env  [2]string
		args []string
		want string
	}{
		{[2]string{"KVSTORE_TIER_SECRET_KEY", "wrong"}, []string{"tier", "status"}, "refused the credentials"},
		{[2]string{"KVSTORE_TIER_SECRET_KEY", "wrong"}, []string{"tier", "ls", "--ns", "a", "--model", fp}, "KVSTORE_TIER_SECRET_KEY"},
		{[2]string{"KVSTORE_TIER_BUCKET", "nope"}, []string{"tier", "status"}, `no bucket "nope"`},
		{[2]string{"KVSTORE_TIER_BUCKET", "nope"}, []string{"tier", "ls", "--ns", "a", "--model", fp}, `no bucket "nope"`},
	} {
		good := os.Getenv(c.env[0])
		t.Setenv(c.env[0], c.env[1])
		r := kv(t, c.args...).want(t, exitFail)
		t.Setenv(c.env[0], good)
		if !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "https response error") {
			t.Errorf("%s=%s %v: %q, want it to say %q", c.env[0], c.env[1], c.args, r.stderr, c.want)
		}
	}
}

// Without a server: missing credentials are a usage error naming both
// variables (they used to fail three attempts later with "static
// credentials are empty"); an http endpoint nobody listens on says it
// cannot be reached (it said "https response error"); --help names the
// variables.
func TestTierErrorsWithoutServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	t.Setenv("KVSTORE_TIER_BUCKET", "b")
	t.Setenv("KVSTORE_TIER_ACCESS_KEY", "")
	t.Setenv("KVSTORE_TIER_SECRET_KEY", "")
	r := kv(t, "tier", "status", "--endpoint", closed).want(t, exitUsage)
	if !strings.Contains(r.stderr, "KVSTORE_TIER_ACCESS_KEY and KVSTORE_TIER_SECRET_KEY") {
		t.Errorf("no credentials: %q", r.stderr)
	}
	t.Setenv("KVSTORE_TIER_ACCESS_KEY", "k")
	t.Setenv("KVSTORE_TIER_SECRET_KEY", "s")
	r = kv(t, "tier", "status", "--endpoint", closed).want(t, exitFail)
	if !strings.Contains(r.stderr, "cannot reach the tier at "+closed) || strings.Contains(r.stderr, "https response error") {
		t.Errorf("closed endpoint: %q", r.stderr)
	}
	r = kv(t, "tier", "pull", "--help").want(t, exitOK)
	for _, v := range []string{"KVSTORE_TIER_ACCESS_KEY", "KVSTORE_TIER_SECRET_KEY", "KVSTORE_TIER_ENDPOINT", "unique prefix"} {
		if !strings.Contains(r.stdout, v) {
			t.Errorf("tier pull --help does not name %s", v)
		}
	}
}
