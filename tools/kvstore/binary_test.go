package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	p := &store.Packet{PacketDesc: format.PacketDesc{Namespace: ns, Model: m, HeaderTokens: 1}}
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
		id, err := db.Put(context.Background(), tinyPacket(ns, i+1, 3+i))
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
	return header2(t, db, id)
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
}

// --help goes to stdout (it is what was asked for), for the root and for
// every verb, and says how to call the verb.
func TestBinaryHelpStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"ls", "--help"}, {"inspect", "-h"}, {"stat", "--help"},
		{"verify", "--help"}, {"check", "--help"}, {"compact", "--help"}, {"gc", "--help"}, {"rm", "--help"},
		{"import", "--help"}, {"export", "--help"}, {"adapter", "train", "--help"}, {"version", "--help"}} {
		r := kv(t, args...).want(t, exitOK)
		verb := "kvstore"
		if args[0] != "--help" && args[0] != "help" {
			verb = "kvstore " + strings.Join(args[:len(args)-1], " ")
		}
		if !strings.Contains(r.stdout, "Usage:\n  "+verb) || r.stderr != "" {
			t.Errorf("%v: stdout %q, stderr %q", args, r.stdout, r.stderr)
		}
	}
}

// A bad flag value is reported once, on one line, without the whole usage.
func TestBinaryBadFlagOnce(t *testing.T) {
	r := kv(t, "ls", "--dir", t.TempDir(), "--limit", "x").want(t, exitUsage)
	if n := strings.Count(r.stderr, `invalid argument "x"`); n != 1 {
		t.Errorf("error printed %d times:\n%s", n, r.stderr)
	}
	if strings.Contains(r.stderr, "Flags:") || strings.Contains(r.stderr, "Usage:") || r.stdout != "" {
		t.Errorf("usage printed with the error:\nstdout %q\nstderr %q", r.stdout, r.stderr)
	}
}

// Flags may follow the verb's positional arguments (docs/cli.md).
func TestBinaryFlagsAnywhere(t *testing.T) {
	dir, ids := testStore(t)
	id := ids[0].String()[:8]
	for _, args := range [][]string{
		{"inspect", id, "--dir", dir},
		{"--dir", dir, "inspect", id},
		{"inspect", "--dir", dir, id},
		{"inspect", id, "--dir", dir, "--json"},
	} {
		r := kv(t, args...).want(t, exitOK)
		if !strings.Contains(r.stdout, ids[0].String()) {
			t.Errorf("%v: stdout does not name the packet:\n%s", args, r.stdout)
		}
	}
}

// --version and the version verb print the module and a version.
func TestBinaryVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := kv(t, args...).want(t, exitOK)
		if !strings.HasPrefix(r.stdout, "kvstore ") || !strings.Contains(r.stdout, "github.com/kvstore/kvstore") ||
			!strings.Contains(r.stdout, "revision") {
			t.Errorf("%v: %q", args, r.stdout)
		}
	}
	r := kv(t, "version", "--json").want(t, exitOK)
	var v versionOutput
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Module != "github.com/kvstore/kvstore" || v.Version == "" || v.Go == "" {
		t.Errorf("version --json: %v %+v", err, v)
	}
}

// completion prints a shell script that names the verbs.
func TestBinaryCompletion(t *testing.T) {
	r := kv(t, "completion", "bash").want(t, exitOK)
	if !strings.Contains(r.stdout, "__start_kvstore") {
		t.Errorf("no bash completion script:\n%.300s", r.stdout)
	}
	r = kv(t, "__complete", "insp").want(t, exitOK)
	if !strings.Contains(r.stdout, "inspect") {
		t.Errorf("verbs not completed: %q", r.stdout)
	}
	r = kv(t, "__complete", "ls", "--li").want(t, exitOK)
	if !strings.Contains(r.stdout, "--limit") {
		t.Errorf("flags not completed: %q", r.stdout)
	}
}
