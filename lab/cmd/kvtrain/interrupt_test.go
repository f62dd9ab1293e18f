package main

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/store"
)

// The built binary, training for far longer than the test runs, stops on
// the first SIGINT or SIGTERM sent after its first step: exit 130 within
// seconds, one "interrupted:" line, and the store as it was (it opens,
// checks clean and holds the adapter stored before, nothing more).
func TestBinaryInterrupt(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	bin := filepath.Join(t.TempDir(), "kvtrain")
	if out, err := exec.Command(testenv.GoToolchain(t), "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			fp := putBefore(t, dir, model)
			cmd := exec.Command(bin, "adapter", "--dir", dir, "--model", model, "--requests", "2", "--epochs", "1000000",
				"--header", "2", "--trailer", "1", "--doc-len", "4", "--question-len", "2", "--answer", "2")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(stderr)
			// A kvtrain that shows no step for a minute is killed, which
			// ends its stderr and fails the test.
			slow := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
			var before []string
			for stepped := false; !stepped; {
				if !lines.Scan() {
					t.Fatalf("kvtrain ended before its first step: stderr %q; exit %d", before, wait(cmd))
				}
				before = append(before, lines.Text())
				stepped = strings.Contains(lines.Text(), "step 1/")
			}
			slow.Stop()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			// A kvtrain still running well after the signal is killed,
			// which ends its stderr and fails the test.
			late := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
			var rest []string
			for lines.Scan() {
				rest = append(rest, lines.Text())
			}
			code := wait(cmd)
			if !late.Stop() {
				t.Fatalf("still running 20 s after the signal; stderr after it: %q", rest)
			}
			if code != exitInterrupted {
				t.Fatalf("exit %d after %v, want %d; stderr after the signal: %q", code, sig, exitInterrupted, rest)
			}
			if len(rest) != 1 || !strings.HasPrefix(rest[0], "interrupted: kvtrain adapter: train: stopped before step ") ||
				!strings.HasSuffix(rest[0], "context canceled") {
				t.Fatalf("stderr after the signal: %q", rest)
			}
			db, err := store.Open(dir, &store.Options{MustExist: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ck, err := db.Check(context.Background(), store.CheckOptions{})
			if err != nil || !ck.OK() || len(ck.Garbage) != 0 {
				t.Fatalf("check after the interrupt: %v %+v", err, ck)
			}
			var names []string
			if err := db.Artifacts(func(i store.ArtifactInfo) error {
				if i.Model != fp {
					t.Errorf("artifact %q of model %s", i.Name, i.Model.Short())
				}
				names = append(names, i.Name)
				return nil
			}); err != nil || strings.Join(names, " ") != store.AdapterArtifact("before") {
				t.Fatalf("artifacts after the interrupt: %q, %v", names, err)
			}
		})
	}
}

// putBefore makes a store in dir holding one untrained adapter, "before",
// for model's f32 packets, and returns their fingerprint.
func putBefore(t *testing.T, dir, model string) format.Fingerprint {
	t.Helper()
	mf := modelFlags{path: model, dtype: "f32"}
	m, fp, err := mf.load()
	if err != nil {
		t.Fatal(err)
	}
	a, err := adapter.Init(m, 1, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := adapter.Put(db, fp, "before", a); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return fp
}

// wait waits for cmd to exit and returns its exit code (-1 when a signal
// killed it).
func wait(cmd *exec.Cmd) int {
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 0
}
