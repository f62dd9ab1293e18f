package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/store"
)

// kvBinary is the real kvstore binary, built once by TestMain; "" when no
// go toolchain is on PATH (the binary tests then skip).
var kvBinary string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kvstore-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if gobin, ok := testenv.GoToolPath(); ok {
		bin := filepath.Join(dir, "kvstore")
		if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			return 1
		}
		kvBinary = bin
	}
	return m.Run()
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
}

// kv runs the binary with args; stdout and stderr are pipes, not a
// terminal, so progress must stay quiet.
func kv(t *testing.T, args ...string) result {
	t.Helper()
	testenv.Need(t, testenv.GoTool, kvBinary != "", "no go command on PATH to build the binary")
	var out, errb bytes.Buffer
	cmd := exec.Command(kvBinary, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	r := result{stdout: out.String(), stderr: errb.String()}
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %v: %v", args, err)
	}
	return r
}

// want fails unless r exited with code.
func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// tinySpec is a small model: 2 layers, 2 KV heads, head dim 4, bf16.
func tinySpec() *format.ModelSpec {
	return &format.ModelSpec{Architecture: "llama", Layers: 2, KVHeads: 2, HeadDim: 4, DType: format.DTypeBF16,
		WeightsID: "tiny", RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}}
}

// tinyPacket returns a packet of n document tokens with distinct bytes.
func tinyPacket(ns string, seed, n int) *store.Packet {
	m := tinySpec()
	p := &store.Packet{Namespace: ns, Model: m, HeaderTokens: 1}
	for i := range n {
		p.TokenIDs = append(p.TokenIDs, uint32(seed*100+i))
	}
	size := m.KVHeads * p.Tokens() * m.HeadDim * m.DType.Size()
	for l := range m.Layers {
		k, v := make([]byte, size), make([]byte, size)
		for i := range size {
			k[i], v[i] = byte(seed+l+i), byte(seed*3+l+i*7)
		}
		p.Layers = append(p.Layers, store.Layer{K: k, V: v})
	}
	return p
}

// testStore makes a store with three packets (two in "a", one in "b") and
// returns its directory and the packets' ids.
func testStore(t *testing.T) (string, []format.PacketID) {
	t.Helper()
	return testStoreWith(t, nil)
}

// testStoreWith is testStore with options (for a small BlobFileSize).
func testStoreWith(t *testing.T, o *store.Options) (string, []format.PacketID) {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	var ids []format.PacketID
	for i, ns := range []string{"a", "a", "b"} {
		id, err := db.Put(tinyPacket(ns, i+1, 3+i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, ids
}

// header reads packet id's header from the store in dir.
func header(t *testing.T, dir string, id format.PacketID) *format.PacketHeader {
	t.Helper()
	db, err := store.Open(dir, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var h *format.PacketHeader
	if err := db.Headers(func(x *format.PacketHeader) error {
		if x.ID == id {
			h = x
		}
		return nil
	}); err != nil || h == nil {
		t.Fatalf("header of %s: %v", id.Short(), err)
	}
	return h
}

// Every verb needs --dir, and refuses bad flags, with exit 2; a directory
// that holds no store is a failure (1).
func TestBinaryUsage(t *testing.T) {
	empty := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{}, exitUsage},
		{[]string{"nosuch"}, exitUsage},
		{[]string{"ls"}, exitUsage},
		{[]string{"inspect", "abcd"}, exitUsage},
		{[]string{"stat"}, exitUsage},
		{[]string{"verify"}, exitUsage},
		{[]string{"check"}, exitUsage},
		{[]string{"compact"}, exitUsage},
		{[]string{"gc"}, exitUsage},
		{[]string{"--dir", "x", "gc", "extra"}, exitUsage},
		{[]string{"rm", "abcd"}, exitUsage},
		{[]string{"import", "x.safetensors"}, exitUsage},
		{[]string{"export", "abcd", "x.safetensors"}, exitUsage},
		{[]string{"--dir", empty, "ls", "--bogus"}, exitUsage},
		{[]string{"--dir", empty, "ls", "extra"}, exitUsage},
		{[]string{"--dir", empty, "ls", "--limit", "-1"}, exitUsage},
		{[]string{"--dir", empty, "inspect"}, exitUsage},
		{[]string{"--dir", empty, "inspect", "zz"}, exitUsage},
		{[]string{"--dir", empty, "rm"}, exitUsage},
		{[]string{"--dir", empty, "export", "abcd"}, exitUsage},
		{[]string{"--dir", empty, "import"}, exitUsage},
		{[]string{"--dir", empty, "compact", "--ratio", "2"}, exitUsage},
		{[]string{"--dir", empty, "compact", "--files", "x"}, exitUsage},
		{[]string{"--dir", empty, "verify", "--max-findings", "-1"}, exitUsage},
		{[]string{"--dir", filepath.Join(empty, "none"), "ls"}, exitFail},
		{[]string{"--dir", empty, "stat"}, exitFail},
		{[]string{"--dir", empty, "verify"}, exitFail},
	} {
		t.Run(fmt.Sprint(c.args), func(t *testing.T) {
			r := kv(t, c.args...).want(t, c.code)
			if r.stderr == "" {
				t.Fatalf("no message on stderr")
			}
		})
	}
	for _, verb := range []string{"ls", "inspect", "stat", "verify", "check", "compact", "gc", "rm", "import", "export"} {
		r := kv(t, verb, "--help").want(t, exitOK)
		if !bytes.Contains([]byte(r.stderr), []byte("usage: kvstore "+verb)) {
			t.Errorf("%s --help: %q", verb, r.stderr)
		}
	}
}
