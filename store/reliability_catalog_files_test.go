package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// catalogSentinels are the errors a damaged catalog may surface as; any
// other error, or a panic, is a finding.
var catalogSentinels = []error{ErrCorruption, ErrNotFound, ErrVersion, ErrFailed, ErrModelMismatch}

func wrapsSentinel(err error) bool {
	for _, s := range catalogSentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// TestCatalogFileFlips flips bits in every kind of catalog file of a closed
// on-disk store (the SST, the WAL, MANIFEST, OPTIONS, markers), truncates
// each at several lengths (the WAL at more), removes each and removes the
// whole catalog directory, then opens the store, reads every packet back
// and runs Check. The store holds acknowledged packets and deleted ones,
// some deleted in the SST, some only in the WAL. Each case must either give
// exactly the acknowledged set (every packet exact, every deleted packet
// ErrNotFound, Check clean) or fail with an error wrapping a store
// sentinel: never a panic, a wrong tensor, an error without a sentinel, a
// lost acknowledged packet or a deleted one back. Every refused case is
// then rebuilt with Recover and must give exactly the acknowledged set.
func TestCatalogFileFlips(t *testing.T) {
	fx := newFlipsFixture(t)
	catDir := filepath.Join(fx.dir, catalogDirName)
	entries, err := os.ReadDir(catDir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	sort.Strings(files)
	kinds := map[string]int{}
	rng := rand.New(rand.NewPCG(15, 15))
	var cases, exact, refused, recovered int
	run := func(kind, what string, mutate func(dir string)) {
		kinds[kind]++
		cases++
		dir := t.TempDir()
		copyStore(t, fx.dir, dir)
		mutate(dir)
		switch out := fx.openAndRead(dir); out {
		case "exact":
			exact++
			return
		case "refused":
			refused++
		default:
			t.Errorf("%s %s: %s", kind, what, out)
			return
		}
		if _, err := Recover(dir, nil); err != nil {
			t.Errorf("%s %s: refused, then Recover: %v", kind, what, err)
			return
		}
		if out := fx.openAndRead(dir); out != "exact" {
			t.Errorf("%s %s: refused, then after Recover: %s", kind, what, out)
			return
		}
		recovered++
	}
	for _, name := range files {
		orig, err := os.ReadFile(filepath.Join(catDir, name))
		if err != nil {
			t.Fatal(err)
		}
		kind := catalogFileKind(name)
		write := func(b []byte) func(string) {
			return func(dir string) {
				if err := os.WriteFile(filepath.Join(dir, catalogDirName, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(orig) > 0 {
			for _, off := range sampleOffsets(rng, len(orig), 48) {
				b := bytes.Clone(orig)
				b[off] ^= 1 << (off % 8)
				run(kind, fmt.Sprintf("%s: bit %d of byte %d", name, off%8, off), write(b))
			}
		}
		lengths := []int{0, len(orig) / 2, len(orig) - 1}
		if kind == "wal" {
			for i := 1; i < 16; i++ {
				lengths = append(lengths, len(orig)*i/16)
			}
		}
		for _, n := range lengths {
			if n >= 0 && n < len(orig) {
				run(kind, fmt.Sprintf("%s: truncated to %d", name, n), write(orig[:n]))
			}
		}
		run(kind, name+": removed", func(dir string) {
			if err := os.Remove(filepath.Join(dir, catalogDirName, name)); err != nil {
				t.Fatal(err)
			}
		})
	}
	run("dir", "catalog directory removed", func(dir string) {
		if err := os.RemoveAll(filepath.Join(dir, catalogDirName)); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%d cases over %v: %d gave exactly the acknowledged set, %d refused with a sentinel (%d of them then rebuilt exactly by Recover), %d failed",
		cases, kinds, exact, refused, recovered, cases-exact-refused)
	if exact == 0 || exact+refused != cases || recovered != refused {
		t.Fatalf("campaign did not run as planned: %d exact, %d refused, %d recovered of %d", exact, refused, recovered, cases)
	}
}

// flipsFixture is a closed on-disk store: acknowledged packets (kept) and
// packets put then deleted (gone), the catalog's SST holding the first
// puts and a delete, its WAL the rest.
type flipsFixture struct {
	dir     string
	spec    *format.ModelSpec
	kept    []format.PacketID
	packets []*Packet
	gone    []format.PacketID
}

func newFlipsFixture(t *testing.T) *flipsFixture {
	t.Helper()
	fx := &flipsFixture{dir: t.TempDir(), spec: &format.ModelSpec{Architecture: "llama", Layers: 2, KVHeads: 1, HeadDim: 8, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}, WeightsID: "catalog-flips"}}
	db, err := Open(fx.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	byIdx := map[int]format.PacketID{}
	put := func(i int) {
		p := floatPacket(fx.spec, "ns", 8+i, 0, 0, uint64(i))
		id, err := db.Put(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		byIdx[i] = id
		fx.packets = append(fx.packets, p)
	}
	del := func(i int) {
		if err := db.Delete(context.Background(), "ns", fx.spec.Fingerprint(), byIdx[i]); err != nil {
			t.Fatal(err)
		}
		fx.gone = append(fx.gone, byIdx[i])
	}
	// Puts 0-3 and the delete of 0 flushed into an SST; puts 4-5 and the
	// deletes of 1 (in the SST) and 4 (in the WAL) in the WAL only.
	for i := range 4 {
		put(i)
	}
	del(0)
	if err := db.cat.DB.Flush(); err != nil {
		t.Fatal(err)
	}
	put(4)
	put(5)
	del(1)
	del(4)
	for i, p := range fx.packets {
		if !slices.Contains(fx.gone, byIdx[i]) {
			fx.kept = append(fx.kept, byIdx[i])
			fx.packets[len(fx.kept)-1] = p
		}
	}
	fx.packets = fx.packets[:len(fx.kept)]
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return fx
}

// openAndRead opens the store in dir read-write, reads every acknowledged
// packet, asks for every deleted one and runs Check, and says how it went:
// "exact", "refused" (an error wrapping a sentinel), or what went wrong.
func (fx *flipsFixture) openAndRead(dir string) (out string) {
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprintf("panic: %v", r)
		}
	}()
	db, err := Open(dir, nil)
	if err != nil {
		if wrapsSentinel(err) {
			return "refused"
		}
		return fmt.Sprintf("Open error without a sentinel: %v", err)
	}
	defer db.Close()
	refused := false
	for i, id := range fx.kept {
		switch res := readPacket(db, fx.spec, id, fx.packets[i]); res {
		case "exact":
		case "refused":
			refused = true
		case "absent":
			return fmt.Sprintf("acknowledged packet %d lost (ErrNotFound)", i)
		default:
			return fmt.Sprintf("packet %d: %s", i, res)
		}
	}
	for i, id := range fx.gone {
		v, err := db.Get(context.Background(), "ns", fx.spec.Fingerprint(), id)
		switch {
		case err == nil:
			v.Release()
			return fmt.Sprintf("deleted packet %d is back", i)
		case errors.Is(err, ErrNotFound):
		case wrapsSentinel(err):
			refused = true
		default:
			return fmt.Sprintf("Get of deleted packet %d: error without a sentinel: %v", i, err)
		}
	}
	if refused {
		return "refused"
	}
	rep, err := db.Check(context.Background(), CheckOptions{})
	switch {
	case err != nil && wrapsSentinel(err):
		return "refused"
	case err != nil:
		return fmt.Sprintf("Check error without a sentinel: %v", err)
	case !rep.OK():
		return fmt.Sprintf("Check findings: %v", rep.Findings)
	}
	return "exact"
}

// readPacket reads packet id and compares it with p: "exact", "absent"
// (ErrNotFound), "refused" (another sentinel) or what went wrong.
func readPacket(db *DB, spec *format.ModelSpec, id format.PacketID, p *Packet) string {
	v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id)
	switch {
	case errors.Is(err, ErrNotFound):
		return "absent"
	case err != nil && wrapsSentinel(err):
		return "refused"
	case err != nil:
		return fmt.Sprintf("Get error without a sentinel: %v", err)
	}
	defer v.Release()
	for l := range spec.Layers {
		for kv, want := range [][]byte{p.Layers[l].K, p.Layers[l].V} {
			got, err := v.Chunk(2*l + kv)
			if err != nil {
				if !wrapsSentinel(err) {
					return fmt.Sprintf("Chunk error without a sentinel: %v", err)
				}
				return "refused"
			}
			if !bytes.Equal(got, want) {
				return fmt.Sprintf("layer %d: wrong tensor", l)
			}
		}
	}
	return "exact"
}

func catalogFileKind(name string) string {
	switch {
	case strings.HasSuffix(name, ".sst"):
		return "sst"
	case strings.HasSuffix(name, ".log"):
		return "wal"
	case strings.HasPrefix(name, "MANIFEST"):
		return "manifest"
	case strings.HasPrefix(name, "OPTIONS"):
		return "options"
	case strings.HasPrefix(name, "marker"):
		return "marker"
	}
	return "other"
}

// sampleOffsets returns the first 16 offsets and n random ones below size.
func sampleOffsets(rng *rand.Rand, size, n int) []int {
	var out []int
	for i := 0; i < min(16, size); i++ {
		out = append(out, i)
	}
	for range n {
		out = append(out, rng.IntN(size))
	}
	return out
}

// copyStore copies the store directory src (closed) to dst.
func copyStore(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
