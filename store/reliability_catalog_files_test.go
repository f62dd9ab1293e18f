package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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
// on-disk store (the SST, the WAL, MANIFEST, OPTIONS, markers) and
// truncates each, then opens the store and reads every packet back. Each
// case must either read every packet exactly or fail with an error
// wrapping a store sentinel: never a panic, never a wrong tensor, never an
// error without a sentinel. Cases where the store opens and an acknowledged
// packet is gone (ErrNotFound: WAL damage ends Pebble's log early) are
// counted and logged, not failed: preventing them needs the catalog to be
// rebuilt from the blob log, which is an open finding (RELIABILITY.md).
func TestCatalogFileFlips(t *testing.T) {
	spec := &format.ModelSpec{Architecture: "llama", Layers: 2, KVHeads: 1, HeadDim: 8, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}, WeightsID: "catalog-flips"}
	golden := t.TempDir()
	db, err := Open(golden, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []format.PacketID
	var packets []*Packet
	for i := range 6 {
		p := floatPacket(spec, "ns", 8+i, 0, 0, uint64(i))
		id, err := db.Put(p)
		if err != nil {
			t.Fatal(err)
		}
		ids, packets = append(ids, id), append(packets, p)
		if i == 3 { // packets 0-3 in an SST, 4-5 in the WAL only
			if err := db.cat.DB.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	catDir := filepath.Join(golden, catalogDirName)
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
	var cases, exact, refused, lost int
	for _, name := range files {
		orig, err := os.ReadFile(filepath.Join(catDir, name))
		if err != nil {
			t.Fatal(err)
		}
		kind := catalogFileKind(name)
		type mutation struct {
			what string
			data []byte
		}
		var muts []mutation
		if len(orig) > 0 {
			for _, off := range sampleOffsets(rng, len(orig), 48) {
				b := bytes.Clone(orig)
				b[off] ^= 1 << (off % 8)
				muts = append(muts, mutation{fmt.Sprintf("bit %d of byte %d", off%8, off), b})
			}
		}
		for _, n := range []int{0, len(orig) / 2, len(orig) - 1} {
			if n >= 0 && n < len(orig) {
				muts = append(muts, mutation{fmt.Sprintf("truncated to %d", n), orig[:n]})
			}
		}
		muts = append(muts, mutation{"removed", nil})
		for _, m := range muts {
			kinds[kind]++
			cases++
			dir := t.TempDir()
			copyStore(t, golden, dir)
			path := filepath.Join(dir, catalogDirName, name)
			if m.data == nil {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, m.data, 0o644); err != nil {
				t.Fatal(err)
			}
			switch out := openAndRead(dir, spec, ids, packets); {
			case out == "exact":
				exact++
			case out == "refused":
				refused++
			case out == "lost":
				lost++
			default:
				t.Errorf("%s (%s) %s: %s", name, kind, m.what, out)
			}
		}
	}
	t.Logf("%d cases over %v: %d read every packet exactly, %d refused with a sentinel, %d opened and lost acknowledged packets (ErrNotFound)",
		cases, kinds, exact, refused, lost)
	if exact == 0 || exact+refused+lost != cases {
		t.Fatalf("campaign did not run as planned: %d exact of %d", exact, cases)
	}
}

// openAndRead opens the store in dir read-write, reads every packet and
// says how it went: "exact", "refused" (an error wrapping a sentinel), or
// what went wrong.
func openAndRead(dir string, spec *format.ModelSpec, ids []format.PacketID, packets []*Packet) (out string) {
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
	refused, lost := false, false
	for i, id := range ids {
		v, err := db.Get("ns", spec.Fingerprint(), id)
		if errors.Is(err, ErrNotFound) {
			lost = true // an acknowledged packet the catalog no longer knows
			continue
		}
		if err != nil {
			if !wrapsSentinel(err) {
				return fmt.Sprintf("Get %d error without a sentinel: %v", i, err)
			}
			refused = true
			continue
		}
		for l := range spec.Layers {
			for kv, want := range [][]byte{packets[i].Layers[l].K, packets[i].Layers[l].V} {
				got, err := v.Chunk(2*l + kv)
				if err != nil {
					v.Release()
					if !wrapsSentinel(err) {
						return fmt.Sprintf("Chunk error without a sentinel: %v", err)
					}
					return "refused"
				}
				if !bytes.Equal(got, want) {
					v.Release()
					return fmt.Sprintf("packet %d layer %d: wrong tensor", i, l)
				}
			}
		}
		v.Release()
	}
	switch {
	case lost:
		return "lost"
	case refused:
		return "refused"
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
