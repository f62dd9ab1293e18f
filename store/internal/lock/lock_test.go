package lock

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestFlock: on the OS's file system a writer excludes everyone, readers
// share, and releasing a lock lets the next holder in.
func TestFlock(t *testing.T) {
	if !FlockSupported {
		t.Skip("no flock on this platform: every lock is FS.Lock (TestMemFS)")
	}
	path := filepath.Join(t.TempDir(), "LOCK")
	w, shared, err := Dir(vfs.Default, vfs.Default, path, false)
	if err != nil || shared {
		t.Fatalf("exclusive lock: shared %v, %v", shared, err)
	}
	if _, _, err := Dir(vfs.Default, vfs.Default, path, true); !errors.Is(err, ErrHeld) {
		t.Fatalf("reader while a writer holds it: %v, want ErrHeld", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r1, shared, err := Dir(vfs.Default, vfs.Default, path, true)
	if err != nil || !shared {
		t.Fatalf("first reader: shared %v, %v", shared, err)
	}
	r2, _, err := Dir(vfs.Default, vfs.Default, path, true)
	if err != nil {
		t.Fatalf("second reader beside the first: %v", err)
	}
	if _, _, err := Dir(vfs.Default, vfs.Default, path, false); !errors.Is(err, ErrHeld) {
		t.Fatalf("writer while readers hold it: %v, want ErrHeld", err)
	}
	r1.Close()
	r2.Close()
	w, _, err = Dir(vfs.Default, vfs.Default, path, false)
	if err != nil {
		t.Fatalf("writer after the readers left: %v", err)
	}
	w.Close()
}

// TestMemFS: on another FS every lock is FS.Lock, exclusive, read-only
// included, and NoLockFS takes nothing.
func TestMemFS(t *testing.T) {
	fs := vfs.NewMem()
	l, shared, err := Dir(fs, fs, "LOCK", true)
	if err != nil || shared {
		t.Fatalf("read-only lock on a mem FS: shared %v, %v", shared, err)
	}
	if _, _, err := Dir(fs, fs, "LOCK", true); err == nil {
		t.Fatal("a second lock on a mem FS was granted")
	}
	n := NoLockFS{FS: fs}
	c, err := n.Lock("LOCK")
	if err != nil {
		t.Fatalf("NoLockFS.Lock: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if l, _, err = Dir(fs, fs, "LOCK", false); err != nil {
		t.Fatalf("after release: %v", err)
	}
	l.Close()
}

// TestWriterNotStarved: two readers take turns so that one of them always
// holds the shared lock; a writer that waits gets the lock within its
// wait every time, because readers arriving while it waits are refused
// with ErrWriterWaiting. Without the mark the writer would never see the
// lock free.
func TestWriterNotStarved(t *testing.T) {
	if !FlockSupported || runtime.GOOS != "linux" {
		t.Skip("the writer's mark needs Linux's open file description locks")
	}
	path := filepath.Join(t.TempDir(), "LOCK")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var refused atomic.Int64
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(r) * 3 * time.Millisecond)
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, _, err := Dir(vfs.Default, vfs.Default, path, true)
				if err != nil {
					if errors.Is(err, ErrWriterWaiting) {
						refused.Add(1)
					}
					time.Sleep(time.Millisecond)
					continue
				}
				time.Sleep(6 * time.Millisecond) // overlaps the other reader's hold
				l.Close()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(20 * time.Millisecond)
	// Without waiting the writer is refused while the readers overlap.
	if l, err := DirWait(vfs.Default, vfs.Default, path, 0); err == nil {
		l.Close()
		t.Log("the writer found a gap between the readers without waiting")
	}
	for i := range 10 {
		start := time.Now()
		l, err := DirWait(vfs.Default, vfs.Default, path, 5*time.Second)
		if err != nil {
			t.Fatalf("writer %d: %v after %v", i, err, time.Since(start))
		}
		if _, _, err := Dir(vfs.Default, vfs.Default, path, true); !errors.Is(err, ErrHeld) {
			t.Fatalf("reader beside the writer %d: %v, want ErrHeld", i, err)
		}
		l.Close()
		time.Sleep(10 * time.Millisecond)
	}
	if refused.Load() == 0 {
		t.Error("no reader was refused while the writer waited")
	}
}

// TestDirWaitTimesOut: a writer waiting behind a holder that stays gives up
// with ErrHeld after its wait, and leaves no mark behind.
func TestDirWaitTimesOut(t *testing.T) {
	if !FlockSupported {
		t.Skip("no flock on this platform")
	}
	path := filepath.Join(t.TempDir(), "LOCK")
	r, _, err := Dir(vfs.Default, vfs.Default, path, true)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := DirWait(vfs.Default, vfs.Default, path, 50*time.Millisecond); !errors.Is(err, ErrHeld) {
		t.Fatalf("writer behind a reader that stays: %v, want ErrHeld", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before its wait", d)
	}
	r2, _, err := Dir(vfs.Default, vfs.Default, path, true)
	if err != nil {
		t.Fatalf("a reader after the writer gave up: %v (a mark left behind?)", err)
	}
	r2.Close()
	r.Close()
	w, err := DirWait(vfs.Default, vfs.Default, path, time.Second)
	if err != nil {
		t.Fatalf("writer once the readers left: %v", err)
	}
	// A writer does not wait for another writer.
	start = time.Now()
	if _, err := DirWait(vfs.Default, vfs.Default, path, 10*time.Second); !errors.Is(err, ErrHeld) {
		t.Fatalf("second writer: %v, want ErrHeld", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a second writer waited %v for the first", d)
	}
	w.Close()
}

// holdEnv makes the test binary a helper that holds the lock file the
// variable names until its stdin closes (TestHeldNamesHolder).
const holdEnv = "KVSTORE_LOCK_TEST_HOLD"

func TestMain(m *testing.M) {
	if path := os.Getenv(holdEnv); path != "" {
		l, _, err := Dir(vfs.Default, vfs.Default, path, false)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("held")
		_, _ = io.Copy(io.Discard, os.Stdin)
		l.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A held lock's error names who holds it where the OS says (Linux): this
// process for a second open in it, another process by pid and command
// name; never "another user".
func TestHeldNamesHolder(t *testing.T) {
	if !FlockSupported {
		t.Skip("no flock on this platform: every lock is FS.Lock (TestMemFS)")
	}
	path := filepath.Join(t.TempDir(), "LOCK")
	l, _, err := Dir(vfs.Default, vfs.Default, path, false)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Dir(vfs.Default, vfs.Default, path, false)
	if !errors.Is(err, ErrHeld) {
		t.Fatalf("second open: %v, want ErrHeld", err)
	}
	if runtime.GOOS == "linux" && !strings.Contains(err.Error(), fmt.Sprintf("this process (pid %d)", os.Getpid())) {
		t.Fatalf("second open in this process: %q does not say so", err)
	}
	l.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("helper: %q, %v", line, err)
	}
	_, _, err = Dir(vfs.Default, vfs.Default, path, true)
	if !errors.Is(err, ErrHeld) {
		t.Fatalf("open while another process holds it: %v, want ErrHeld", err)
	}
	if want := fmt.Sprintf("process %d (", cmd.Process.Pid); runtime.GOOS == "linux" && !strings.Contains(err.Error(), want) {
		t.Fatalf("open while process %d holds it: %q does not name it", cmd.Process.Pid, err)
	}
}
