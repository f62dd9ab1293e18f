package main

import (
	"os"
	"path/filepath"
	"testing"
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
