package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	dir, _ := testStore(t)
	r := kv(t, "--dir", dir, "check").want(t, exitOK)
	if !strings.Contains(r.stdout, "3 packets") || !strings.Contains(r.stdout, "0 findings") || r.stderr != "" {
		t.Fatalf("check:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	// Without its blob file, every packet dangles.
	blobs, err := filepath.Glob(filepath.Join(dir, "blobs", "*.blob"))
	if err != nil || len(blobs) != 1 {
		t.Fatalf("blob files %v: %v", blobs, err)
	}
	if err := os.Rename(blobs[0], blobs[0]+".moved"); err != nil {
		t.Fatal(err)
	}
	var out checkOutput
	r = kv(t, "--dir", dir, "--json", "check").want(t, exitFail)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Findings) == 0 || !strings.Contains(r.stderr, "findings") {
		t.Fatalf("check of a store without its blob file: %+v\n%s", out, r.stderr)
	}
}
