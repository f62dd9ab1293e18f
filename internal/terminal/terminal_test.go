package terminal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestIs: a buffer and a regular file are not terminals; /dev/tty is one
// when this process has a controlling terminal.
func TestIs(t *testing.T) {
	if Is(&bytes.Buffer{}) {
		t.Error("a bytes.Buffer is a terminal")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if Is(f) {
		t.Error("a regular file is a terminal")
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if !Is(tty) {
			t.Error("/dev/tty is not a terminal")
		}
	}
}
