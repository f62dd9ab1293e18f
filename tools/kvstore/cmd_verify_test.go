package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
