package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvstore/kvstore/store"
)

// rm, gc and compact on a directory that holds no store fail and create
// nothing (they used to create an empty store, and gc and compact exit 0);
// a read verb leaves no LOCK file behind.
func TestMaintenanceVerbsNeverCreate(t *testing.T) {
	for _, args := range [][]string{{"gc"}, {"compact"}, {"rm", "abcd"}, {"ls"}, {"stat"}} {
		dir := t.TempDir()
		r := kv(t, append([]string{"--dir", dir}, args...)...).want(t, exitFail)
		if r.stderr == "" {
			t.Errorf("%v: no message", args)
		}
		if names, _ := os.ReadDir(dir); len(names) != 0 {
			t.Errorf("%v on an empty directory left %v", args, names)
		}
		typo := filepath.Join(dir, "typo")
		kv(t, append([]string{"--dir", typo}, args...)...).want(t, exitFail)
		if _, err := os.Stat(typo); !os.IsNotExist(err) {
			t.Errorf("%v created the mistyped directory %s", args, typo)
		}
	}
}

// A store another process has open is refused with a message that names
// the holder where the OS says (this test process, on Linux), never
// "another user", and says what to do: --addr for a verb that has it,
// stopping the holder for one that writes.
func TestLockedNamesHolderAndSuggestsAddr(t *testing.T) {
	dir, ids := testStore(t)
	db, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls"}, "kvstore ls --addr http://HOST:PORT/PREFIX"},
		{[]string{"stat"}, "kvstore stat --addr"},
		{[]string{"rm", ids[0].String()}, "stop it"},
	} {
		r := kv(t, append([]string{"--dir", dir}, tc.args...)...).want(t, exitFail)
		if strings.Contains(r.stderr, "another user") || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "store/admin") {
			t.Errorf("%v on a store held elsewhere: stderr %q, want a hint containing %q", tc.args, r.stderr, tc.want)
		}
		if holder := fmt.Sprintf("process %d (", os.Getpid()); runtime.GOOS == "linux" && !strings.Contains(r.stderr, holder) {
			t.Errorf("%v: stderr %q does not name the holder, %s...)", tc.args, r.stderr, holder)
		}
	}
}

// TestLockWaitBesideReaders: while two readers in this process reopen the
// store read-only in a loop, one always holding it, rm (a writing verb)
// waits for them with the default --lock-wait and succeeds, instead of
// being starved.
func TestLockWaitBesideReaders(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a waiting writer's mark needs Linux's open file description locks")
	}
	dir, ids := testStore(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var opened atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				db, err := store.Open(dir, &store.Options{ReadOnly: true})
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				opened.Add(1)
				time.Sleep(30 * time.Millisecond)
				db.Close()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for opened.Load() < 4 {
		time.Sleep(5 * time.Millisecond)
	}
	r := kv(t, "--dir", dir, "rm", ids[0].String()).want(t, exitOK)
	if !strings.Contains(r.stdout, "removed "+ids[0].String()) {
		t.Fatalf("rm beside looping readers: %q", r.stdout)
	}
}
