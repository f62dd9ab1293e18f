package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// The reliability suite (RELIABILITY.md) lives in reliability_*_test.go.
// Each campaign has a short form that runs in `go test -race ./...` and a
// long form behind KVSTORE_LONG=1; every figure it reports comes from a
// t.Logf line, so `go test -v -run Reliability ./store` prints them.

// longForm reports whether KVSTORE_LONG is set.
func longForm() bool { return os.Getenv("KVSTORE_LONG") != "" }

// pick returns short, or long under KVSTORE_LONG=1.
func pick(short, long int) int {
	if longForm() {
		return long
	}
	return short
}

// readOutcome is what reading one packet back gave.
type readOutcome int

const (
	readExact   readOutcome = iota // every chunk equal to what was put
	readCorrupt                    // an error wrapping ErrCorruption
	readAbsent                     // ErrNotFound
	readWrong                      // bytes returned that differ from what was put: never allowed
	readOther                      // any other error
	readPanic                      // the store panicked: never allowed
)

func (o readOutcome) String() string {
	return [...]string{"exact", "corrupt", "absent", "WRONG", "other error", "PANIC"}[o]
}

// readBack reads every chunk of packet id and compares it with p. It never
// panics: a panic in the store is returned as readPanic.
func readBack(db *DB, p *Packet, id format.PacketID) (out readOutcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = readPanic, fmt.Errorf("panic: %v", r)
		}
	}()
	v, err := db.Get(context.Background(), p.Namespace, p.Model.Fingerprint(), id)
	if err != nil {
		return classify(err), err
	}
	defer v.Release()
	for l := range p.Layers {
		k, val, err := v.Layer(l)
		if err != nil {
			return classify(err), err
		}
		if !bytes.Equal(k, p.Layers[l].K) || !bytes.Equal(val, p.Layers[l].V) {
			return readWrong, fmt.Errorf("packet %s layer %d: bytes differ from what was put", id.Short(), l)
		}
	}
	return readExact, nil
}

func classify(err error) readOutcome {
	switch {
	case errors.Is(err, ErrCorruption):
		return readCorrupt
	case errors.Is(err, ErrNotFound):
		return readAbsent
	}
	return readOther
}

// golden is a small store built for a campaign, closed: its packets cross
// blob files, have padded chunks (odd head dims), and one model has an
// artifact, so that every kind of catalog value is there.
type golden struct {
	fs      vfs.FS
	dir     string
	opts    Options
	packets []*Packet
	ids     []format.PacketID
	headers []*format.PacketHeader
}

// buildGolden writes the golden store on fs in dir and closes it.
func buildGolden(t testing.TB, fs vfs.FS, dir string) *golden {
	t.Helper()
	g := &golden{fs: fs, dir: dir, opts: Options{FS: fs, BlobFileSize: 64 << 10, Logger: quiet,
		CatalogMemTableSize: 64 << 20}}
	db, err := Open(dir, &g.opts)
	if err != nil {
		t.Fatal(err)
	}
	specs := []*format.ModelSpec{testSpec(format.DTypeF32, 2, 2, 3), testSpec(format.DTypeBF16, 3, 1, 8)}
	for i, toks := range []int{5, 300, 40, 1, 700, 90, 17} {
		p := randPacket(specs[i%2], fmt.Sprintf("ns%d", i%3), toks, uint64(100+i))
		id, err := db.Put(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		g.packets, g.ids = append(g.packets, p), append(g.ids, id)
	}
	art := make([]byte, 2*3*4)
	if err := db.PutArtifact(specs[0].Fingerprint(), "router-w", art, ArtifactMeta{DType: format.DTypeF32, Shape: []int{2, 3}, Note: "n"}); err != nil {
		t.Fatal(err)
	}
	for i, id := range g.ids {
		v, err := db.Get(context.Background(), g.packets[i].Namespace, g.packets[i].Model.Fingerprint(), id)
		if err != nil {
			t.Fatal(err)
		}
		g.headers = append(g.headers, v.Header())
		v.Release()
	}
	if n := len(db.BlobFiles()); n < 2 {
		t.Fatalf("golden store has %d blob files, want several", n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return g
}

// open opens the golden store with its options, changed by o if not nil.
func (g *golden) open(t testing.TB, o func(*Options)) *DB {
	t.Helper()
	opts := g.opts
	if o != nil {
		o(&opts)
	}
	db, err := Open(g.dir, &opts)
	if err != nil {
		t.Fatalf("open golden store: %v", err)
	}
	return db
}

// blobPath is the path of blob file num.
func (g *golden) blobPath(num uint32) string {
	return g.fs.PathJoin(g.dir, blobsDirName, bloblog.FileName(num))
}

// checkAll reads every golden packet and requires it exact.
func (g *golden) checkAll(t testing.TB, db *DB, where string) {
	t.Helper()
	for i, p := range g.packets {
		if out, err := readBack(db, p, g.ids[i]); out != readExact {
			t.Fatalf("%s: packet %d: %v (%v)", where, i, out, err)
		}
	}
}
