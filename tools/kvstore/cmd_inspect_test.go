package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store"
)

func TestInspect(t *testing.T) {
	dir, ids := testStore(t)
	h := header(t, dir, ids[1])
	var out inspectOutput
	r := kv(t, "--dir", dir, "--json", "inspect", ids[1].String()[:10]).want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.ID != ids[1].String() || out.Namespace != "a" || out.Tokens != h.Tokens || len(out.Chunks) != 4 ||
		out.Spec == nil || out.Spec.HeadDim != 4 || out.ExtentOffset != h.ExtentOffset || !strings.HasSuffix(out.File, ".blob") {
		t.Fatalf("inspect: %+v", out)
	}
	for i, c := range out.Chunks {
		d := h.Chunks[i]
		if c.Offset != d.Offset || c.Length != d.Length || c.CRC32C != fmt.Sprintf("%08x", d.CRC32C) || c.Codec != "raw" {
			t.Fatalf("chunk %d: %+v, header %+v", i, c, d)
		}
	}
	text := kv(t, "--dir", dir, "inspect", ids[1].String()).want(t, exitOK).stdout
	for _, want := range []string{ids[1].String(), "CRC32C", "rotate-half", fmt.Sprintf("%08x", h.Chunks[3].CRC32C)} {
		if !strings.Contains(text, want) {
			t.Fatalf("inspect text lacks %q:\n%s", want, text)
		}
	}
	kv(t, "--dir", dir, "inspect", "--ns", "b", ids[1].String()[:10]).want(t, exitFail) // not in b
	kv(t, "--dir", dir, "inspect", "0000000000").want(t, exitFail)
}

// A prefix that matches two packets is ambiguous: usage error.
func TestInspectAmbiguous(t *testing.T) {
	dir, ids := testStore(t)
	a, b := ids[0].String(), ids[1].String()
	n := 0
	for n < len(a) && a[n] == b[n] {
		n++
	}
	if n >= 4 {
		r := kv(t, "--dir", dir, "inspect", a[:n]).want(t, exitUsage)
		if !strings.Contains(r.stderr, "ambiguous") {
			t.Fatal(r.stderr)
		}
		return
	}
	// The ids share fewer than 4 digits; a 4-digit prefix is then unique.
	kv(t, "--dir", dir, "inspect", a[:4]).want(t, exitOK)
}

// A pruned packet: inspect says how many rows it keeps and lists its
// positions chunk (a 1-byte bitmap per (layer, head) for 4 tokens); export
// refuses it with a clear error.
func TestInspectExportPruned(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPacket("a", 1, 3) // 4 rows
	p.Keep = &prune.Set{Layers: 2, KVHeads: 2, Tokens: 4, Keep: [][]int32{{0, 2}, {1, 3}, {0, 1}, {2, 3}}}
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var out inspectOutput
	r := kv(t, "--dir", dir, "--json", "inspect", id.String()).want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.KeptTokens != 2 || out.Tokens != 4 || len(out.Chunks) != 5 || out.Chunks[4].Kind != "positions" ||
		out.Chunks[4].DType != "u8" || fmt.Sprint(out.Chunks[4].Shape) != "[2 2 1]" || out.Chunks[4].Length != 4 ||
		fmt.Sprint(out.Chunks[0].Shape) != "[2 2 4]" {
		t.Fatalf("inspect: %+v", out)
	}
	text := kv(t, "--dir", dir, "inspect", id.String()).want(t, exitOK).stdout
	for _, want := range []string{"pruned     2 of 4 tokens per (layer, head), kept positions in a 1-byte bitmap per (layer, head)", "[2 kv heads][2 tokens][4 head dim]", "positions"} {
		if !strings.Contains(text, want) {
			t.Fatalf("inspect text lacks %q:\n%s", want, text)
		}
	}
	file := filepath.Join(t.TempDir(), "p.safetensors")
	r = kv(t, "--dir", dir, "export", id.String(), file).want(t, exitFail)
	if !strings.Contains(r.stderr, "is pruned (2 of 4 tokens per (layer, head))") {
		t.Fatalf("export of a pruned packet: %q", r.stderr)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("export of a pruned packet left a file: %v", err)
	}
	kv(t, "--dir", dir, "verify").want(t, exitOK)
	kv(t, "--dir", dir, "check").want(t, exitOK)
}

// inspect, rm and export of an id that is in another namespace than --ns
// say so (they used to say only "no packet"); an id in none says that the
// filter applied and it is nowhere else either.
func TestNotFoundNamesNamespaceFilter(t *testing.T) {
	dir, ids, _ := spanTestStore(t)
	a := ids[0].String()[:12] // namespace "a"
	for _, args := range [][]string{
		{"inspect", a, "--ns", "b"},
		{"rm", a, "--ns", "b"},
		{"export", a, filepath.Join(t.TempDir(), "x.safetensors"), "--ns", "b"},
	} {
		r := kv(t, append([]string{"--dir", dir}, args...)...).want(t, exitFail)
		if !strings.Contains(r.stderr, `in namespace "b"`) || !strings.Contains(r.stderr, `it is in namespace "a"`) {
			t.Errorf("%v: %q, want it to name the filter and namespace \"a\"", args, r.stderr)
		}
	}
	r := kv(t, "--dir", dir, "inspect", "ffffff", "--ns", "b").want(t, exitFail)
	if !strings.Contains(r.stderr, `in namespace "b", nor in any other`) {
		t.Errorf("inspect of an id in no namespace: %q", r.stderr)
	}
	r = kv(t, "--dir", dir, "inspect", "ffffff").want(t, exitFail)
	if strings.Contains(r.stderr, "namespace") {
		t.Errorf("inspect without --ns: %q", r.stderr)
	}
}
