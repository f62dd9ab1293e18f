package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/store"
)

// bigStore makes a store of n packets of about 1 MiB each in blob files
// sealed at 8 MiB, and deletes every other packet, so compact --ratio 1
// has n/2 MiB to copy.
func bigStore(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(dir, &store.Options{BlobFileSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	m := &format.ModelSpec{Architecture: "llama", Layers: 8, KVHeads: 8, HeadDim: 128, DType: format.DTypeBF16,
		WeightsID: "big", RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}}
	for i := range n {
		p := &store.Packet{PacketDesc: format.PacketDesc{Namespace: "big", Model: m}}
		for j := range 32 {
			p.TokenIDs = append(p.TokenIDs, uint32(i*100+j))
		}
		size := m.KVHeads * p.Tokens() * m.HeadDim * m.DType.Size()
		for l := range m.Layers {
			k, v := make([]byte, size), make([]byte, size)
			for b := range size {
				k[b], v[b] = byte(i+l+b), byte(i*3+l+b*7)
			}
			p.Layers = append(p.Layers, store.Layer{K: k, V: v})
		}
		id, err := db.Put(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := db.Delete(context.Background(), p.Namespace, m.Fingerprint(), id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// blobFiles lists the blob files of the store in dir.
func blobFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "blobs", "*.blob"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// SIGINT during compact cancels it: one "interrupted:" line, exit 130, no
// output blob file left behind, and check and verify find the store whole.
// SIGTERM does the same.
func TestBinaryInterruptCompact(t *testing.T) {
	testenv.Need(t, testenv.GoTool, kvBinary != "", "no go command on PATH to build the binary")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			for n := 96; ; n *= 2 {
				dir := bigStore(t, n)
				before := blobFiles(t, dir)
				r, interrupted := interruptCompact(t, dir, len(before), sig)
				if !interrupted {
					if n >= 384 {
						t.Fatalf("compact of %d MiB finished before the signal landed", n/2)
					}
					continue // finished first: try a bigger store
				}
				r.want(t, exitInterrupted)
				if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 ||
					!strings.HasPrefix(lines[0], "interrupted: kvstore compact: ") {
					t.Fatalf("stderr: %q", r.stderr)
				}
				if after := blobFiles(t, dir); strings.Join(after, " ") != strings.Join(before, " ") {
					t.Fatalf("blob files before %q, after %q", before, after)
				}
				var ck checkOutput
				out := kv(t, "--dir", dir, "--json", "check").want(t, exitOK).stdout
				if err := json.Unmarshal([]byte(out), &ck); err != nil || len(ck.Garbage) != 0 || ck.Packets != n/2 {
					t.Fatalf("check after the interrupt: %v %s", err, out)
				}
				kv(t, "--dir", dir, "verify").want(t, exitOK)
				return
			}
		})
	}
}

// interruptCompact starts compact --ratio 1 on dir, sends sig once an
// output file (beyond the files existing ones) appears, and reports
// whether the signal came before compact finished.
func interruptCompact(t *testing.T, dir string, files int, sig syscall.Signal) (result, bool) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(kvBinary, "compact", "--dir", dir, "--ratio", "1")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	sent := false
	for !sent {
		select {
		case err = <-done:
			return result{stdout: out.String(), stderr: errb.String()}, false
		case <-time.After(time.Millisecond):
			if len(blobFiles(t, dir)) > files {
				sent = cmd.Process.Signal(sig) == nil
			}
		}
	}
	err = <-done
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	}
	if r.code == exitOK && strings.Contains(r.stdout, "rewrote") {
		return r, false // finished before the signal was handled
	}
	return r, true
}

// SIGINT or SIGTERM during a demo's long prefill (documents of 4096
// tokens, minutes of work) stops it within seconds: one "interrupted:"
// line, exit 130, and the --dir store checks and verifies clean.
func TestBinaryInterruptDemo(t *testing.T) {
	testenv.Need(t, testenv.GoTool, kvBinary != "", "no go command on PATH to build the binary")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			var out, errb bytes.Buffer
			cmd := exec.Command(kvBinary, "--dir", dir, "demo", "--docs", "4", "--tokens", "4096")
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// The store is open once its lock file is there: the demo is
			// in its prefills.
			for open := false; !open; {
				select {
				case err := <-done:
					t.Fatalf("demo ended before the signal: %v\nstdout %s\nstderr %s", err, out.String(), errb.String())
				case <-time.After(10 * time.Millisecond):
					_, err := os.Stat(filepath.Join(dir, "LOCK"))
					open = err == nil
				}
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("demo still running 20 s after %v; stderr %q", sig, errb.String())
			}
			r := result{stdout: out.String(), stderr: errb.String()}
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				r.code = ee.ExitCode()
			}
			r.want(t, exitInterrupted)
			if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 ||
				!strings.HasPrefix(lines[0], "interrupted: kvstore demo: prefill document 1/4: stopped at token ") || r.stdout != "" {
				t.Fatalf("stdout %q, stderr %q", r.stdout, r.stderr)
			}
			kv(t, "--dir", dir, "check").want(t, exitOK)
			kv(t, "--dir", dir, "verify").want(t, exitOK)
		})
	}
}
