package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kvstore/kvstore/format"
)

// writers calls every writer of db once, each with arguments that would
// otherwise get past the helper (a stored packet, valid names).
func writers(db *DB, p *Packet, id format.PacketID) map[string]func() error {
	fp := p.Model.Fingerprint()
	return map[string]func() error{
		"Put":              func() error { _, err := db.Put(context.Background(), p); return err },
		"Delete":           func() error { return db.Delete(context.Background(), p.Namespace, fp, id) },
		"Pin":              func() error { return db.Pin(p.Namespace, fp, id) },
		"Unpin":            func() error { return db.Unpin(p.Namespace, fp, id) },
		"PutArtifact":      func() error { return db.PutArtifact(fp, "a", []byte{1}, ArtifactMeta{}) },
		"DeleteArtifact":   func() error { return db.DeleteArtifact(fp, "a") },
		"Compact":          func() error { _, err := db.Compact(context.Background(), CompactOptions{}); return err },
		"GC":               func() error { _, err := db.GC(context.Background(), GCOptions{}); return err },
		"DeleteSpanMemory": func() error { return db.DeleteSpanMemory(context.Background(), p.Namespace, fp, "ctx") },
		"PutSpanMemory(nil)": func() error {
			_, err := db.PutSpanMemory(context.Background(), p.Namespace, "ctx", &SpanMemory{})
			return err
		},
	}
}

// TestWriteRefusals: every writer goes through write, so each is refused
// the same way on a read-only store, after Close, and once the catalog
// has failed.
func TestWriteRefusals(t *testing.T) {
	spec := testSpec(format.DTypeF16, 2, 2, 8)
	p := randPacket(spec, "ns", 4, 1)
	fs := vfs.NewMem()
	db := openMem(t, fs, nil)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	ro := openMem(t, fs, &Options{ReadOnly: true})
	for name, w := range writers(ro, p, id) {
		if err := w(); !errors.Is(err, ErrReadOnly) {
			t.Errorf("read-only %s: %v, want ErrReadOnly", name, err)
		}
	}
	ro.Close()
	for name, w := range writers(ro, p, id) {
		if err := w(); !errors.Is(err, ErrClosed) {
			t.Errorf("closed %s: %v, want ErrClosed", name, err)
		}
	}

	db = openMem(t, fs, nil)
	defer db.Close()
	failure := fmt.Errorf("%w: test", ErrFailed)
	db.writeMu.Lock()
	db.failed = failure
	db.writeMu.Unlock()
	for name, w := range writers(db, p, id) {
		err := w()
		if name == "PutSpanMemory(nil)" {
			// An empty memory is refused before the lock is taken.
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("failed %s: %v, want ErrInvalidArgument first", name, err)
			}
			continue
		}
		if err != failure {
			t.Errorf("failed %s: %v, want the remembered failure", name, err)
		}
	}
	if _, err := db.Check(context.Background(), CheckOptions{}); err != nil {
		t.Errorf("Check on a failed store: %v, want it to run", err)
	}
}
