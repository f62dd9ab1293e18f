package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/store"
	"github.com/kvstore/kvstore/store/admin"
)

func TestVerifyHealthy(t *testing.T) {
	dir, _ := testStore(t)
	r := kv(t, "--dir", dir, "verify").want(t, exitOK)
	if !strings.Contains(r.stdout, "verified 3 extents, 12 chunks") || !strings.HasSuffix(r.stdout, ": ok\n") {
		t.Fatalf("verify:\n%s", r.stdout)
	}
	if r.stderr != "" {
		t.Fatalf("progress or messages on a piped stderr: %q", r.stderr)
	}
}

// A flipped byte in one chunk: verify exits 1 and names the file and the
// chunk's offset; other chunks still verify.
func TestVerifyCorrupt(t *testing.T) {
	dir, ids := testStore(t)
	h := header(t, dir, ids[1])
	c := h.Chunks[3] // layer 1 V
	file := filepath.Join(dir, "blobs", fmt.Sprintf("%06d.blob", c.BlobFile))
	flipByte(t, file, int64(c.Offset+c.Length/2))

	r := kv(t, "--dir", dir, "verify").want(t, exitFail)
	want := fmt.Sprintf("file %s offset %d", file, c.Offset)
	if !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "layer 1 V") || !strings.Contains(r.stderr, "1 findings") {
		t.Fatalf("verify output lacks %q:\nstdout:\n%s\nstderr:\n%s", want, r.stdout, r.stderr)
	}
	var out verifyOutput
	r = kv(t, "--dir", dir, "verify", "--json").want(t, exitFail)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	var chunkFindings int
	for _, f := range out.Findings {
		if f.Kind == "chunk-crc" {
			chunkFindings++
			if f.File != file || f.Offset != c.Offset || f.ID != ids[1].String() || f.Layer != 1 || f.Chunk != "V" {
				t.Fatalf("finding %+v", f)
			}
		}
	}
	if chunkFindings != 1 || out.Extents != 3 {
		t.Fatalf("verify --json: %+v", out)
	}
	// export reads through views, which verify too: it refuses.
	kv(t, "--dir", dir, "export", ids[1].String(), filepath.Join(t.TempDir(), "x.safetensors")).want(t, exitFail)
}

func flipByte(t *testing.T, name string, off int64) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// --max-findings is honoured by a remote verify (--addr, the admin handler
// of the store live in this process) as by a local one: with a bad chunk in
// each of the three packets and a limit of 2, both report exactly 2
// findings and say they stopped at the limit, in text and in JSON.
func TestVerifyMaxFindingsRemote(t *testing.T) {
	dir, ids := testStore(t)
	for _, id := range ids {
		c := header(t, dir, id).Chunks[1]
		flipByte(t, filepath.Join(dir, "blobs", fmt.Sprintf("%06d.blob", c.BlobFile)), int64(c.Offset+c.Length/2))
	}
	// verify checks its output: exit 1, n finding lines, then the status.
	verify := func(where string, n int, truncated bool, args ...string) (string, string) {
		t.Helper()
		code, out, errs := runIn(append([]string{"verify"}, args...)...)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		status := fmt.Sprintf("%d findings", n)
		if truncated {
			status += " (stopped at --max-findings)"
		}
		if code != exitFail || len(lines) != n+1 || !strings.HasSuffix(lines[n], ": "+status) {
			t.Fatalf("%s verify %v: exit %d, want %d findings ending %q:\n%s\nstderr: %s", where, args, code, n, status, out, errs)
		}
		_, js, _ := runIn(append([]string{"verify", "--json"}, args...)...)
		var v verifyOutput
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			t.Fatalf("%s verify %v --json: %v\n%s", where, args, err, js)
		}
		if len(v.Findings) != n || v.Truncated != truncated {
			t.Fatalf("%s verify %v --json: %d findings, truncated %v; want %d, %v", where, args, len(v.Findings), v.Truncated, n, truncated)
		}
		return out, js
	}
	verify("local", 3, false, "--dir", dir)
	localText, localJSON := verify("local", 2, true, "--dir", dir, "--max-findings", "2")

	db, err := store.Open(dir, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := httptest.NewServer(admin.Handler(db, nil))
	defer srv.Close()
	verify("remote", 3, false, "--addr", srv.URL)
	text, js := verify("remote", 2, true, "--addr", srv.URL, "--max-findings", "2")
	if text != localText || js != localJSON {
		t.Errorf("remote verify --max-findings 2 gives\n%s%s\nlocal gives\n%s%s", text, js, localText, localJSON)
	}
}
