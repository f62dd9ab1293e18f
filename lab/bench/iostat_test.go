package bench

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseIOCounters(t *testing.T) {
	in := "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 4096\n"
	c, err := parseIOCounters([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if c != (IOCounters{ReadBytes: 4096, WriteBytes: 8192, CancelledWriteBytes: 4096}) {
		t.Fatalf("parsed %+v", c)
	}
	d := IOCounters{ReadBytes: 5000, WriteBytes: 20000, CancelledWriteBytes: 4096}
	if c.Written(d) != 11808 || c.Read(d) != 904 {
		t.Fatalf("Written %d Read %d", c.Written(d), c.Read(d))
	}
	for _, bad := range []string{"read_bytes: 1\n", "read_bytes: x\nwrite_bytes: 1\ncancelled_write_bytes: 0\n"} {
		if _, err := parseIOCounters([]byte(bad)); err == nil {
			t.Fatalf("parsed %q without error", bad)
		}
	}
}

// TestIOCountersSeeSyncedWrite checks the accounting Run relies on: a
// synced write of 1 MiB shows in write_bytes.
func TestIOCountersSeeSyncedWrite(t *testing.T) {
	before, err := ReadIOCounters()
	if err != nil {
		t.Skipf("no task I/O accounting here: %v", err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "w"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	after, err := ReadIOCounters()
	if err != nil {
		t.Fatal(err)
	}
	if fs, _ := FSType(f.Name()); memoryFS(fs) {
		t.Skipf("%s is on %s, which does no storage I/O", f.Name(), fs)
	}
	if w := before.Written(after); w < 1<<20 {
		t.Fatalf("a synced 1 MiB write shows as %d bytes written", w)
	}
}
