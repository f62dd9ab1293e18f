package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// hugeDim is a dimension above the 2^31-1 an artifact allows; a 32-bit int
// holds none, so there it is -1, refused as negative.
const hugeDim = 1<<40*(bits.UintSize/64) - (1 - bits.UintSize/64)

func TestArtifactRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, nil)
	a, b := testSpec(format.DTypeBF16, 2, 2, 8).Fingerprint(), testSpec(format.DTypeF32, 2, 2, 8).Fingerprint()
	header := bytes.Repeat([]byte{1, 2, 3, 4}, 2*64) // 4 soft tokens x 64 dims of bf16
	meta := ArtifactMeta{DType: format.DTypeBF16, Shape: []int{4, 64}, Note: "run 17"}
	big := bytes.Repeat([]byte("router"), 1<<20) // 6 MiB: larger than the memtable
	for _, put := range []struct {
		model format.Fingerprint
		name  string
		data  []byte
		meta  ArtifactMeta
	}{
		{a, "adapter/header", header, meta},
		{a, "adapter/trailer", []byte{9}, ArtifactMeta{}},
		{a, "router/W", big, ArtifactMeta{DType: format.DTypeF32, Shape: []int{len(big) / 4}}},
		{b, "adapter/header", []byte("b's header"), ArtifactMeta{}},
		{a, "empty", nil, ArtifactMeta{}},
	} {
		if err := db.PutArtifact(put.model, put.name, put.data, put.meta); err != nil {
			t.Fatalf("PutArtifact %q: %v", put.name, err)
		}
	}
	header[0] = 99 // the store keeps its own copy

	check := func(db *DB) {
		t.Helper()
		got, err := db.GetArtifact(a, "adapter/header")
		if err != nil || got[0] != 1 || len(got) != len(header) {
			t.Fatalf("GetArtifact: %v (%d bytes)", err, len(got))
		}
		if got, err := db.GetArtifact(b, "adapter/header"); err != nil || string(got) != "b's header" {
			t.Fatalf("GetArtifact of the other model: %q, %v", got, err)
		}
		if got, err := db.GetArtifact(a, "router/W"); err != nil || !bytes.Equal(got, big) {
			t.Fatalf("GetArtifact router/W: %v", err)
		}
		info, err := db.StatArtifact(a, "adapter/header")
		if err != nil || info.Name != "adapter/header" || info.Model != a || info.Size != 512 ||
			info.Meta.DType != format.DTypeBF16 || fmt.Sprint(info.Meta.Shape) != "[4 64]" || info.Meta.Note != "run 17" || info.CreatedAt.IsZero() {
			t.Fatalf("StatArtifact: %+v, %v", info, err)
		}
		names, err := db.ListArtifacts(a)
		if err != nil || fmt.Sprint(names) != "[adapter/header adapter/trailer empty router/W]" {
			t.Fatalf("ListArtifacts(a) = %q, %v", names, err)
		}
		if got, err := db.GetArtifact(a, "empty"); err != nil || len(got) != 0 {
			t.Fatalf("empty artifact: %q, %v", got, err)
		}
	}
	check(db)
	db.Close()
	db = openMem(t, fs, nil) // durable across reopen
	defer db.Close()
	check(db)

	if err := db.PutArtifact(a, "adapter/trailer", []byte{7, 7}, ArtifactMeta{}); err != nil {
		t.Fatal(err)
	}
	if got, err := db.GetArtifact(a, "adapter/trailer"); err != nil || !bytes.Equal(got, []byte{7, 7}) {
		t.Fatalf("replaced artifact: %v, %v", got, err)
	}
	if err := db.DeleteArtifact(a, "adapter/header"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetArtifact(a, "adapter/header"); !errors.Is(err, ErrModelMismatch) {
		t.Fatalf("after delete, b still has the name: %v, want ErrModelMismatch", err)
	}
	if err := db.DeleteArtifact(b, "adapter/header"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetArtifact(a, "adapter/header"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted everywhere: %v, want ErrNotFound", err)
	}
	if names, _ := db.ListArtifacts(b); len(names) != 0 {
		t.Fatalf("b still lists %q", names)
	}
}

func TestArtifactErrors(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	a, b := format.Fingerprint{1}, format.Fingerprint{2}
	if err := db.PutArtifact(a, "w", []byte{1, 2, 3, 4}, ArtifactMeta{}); err != nil {
		t.Fatal(err)
	}
	// A name that is a prefix of another must not match it.
	for _, n := range []string{"w2", "z2"} {
		if err := db.PutArtifact(b, n, []byte{1}, ArtifactMeta{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		model format.Fingerprint
		art   string
		want  error
	}{
		{"absent", a, "nope", ErrNotFound},
		{"other model", b, "w", ErrModelMismatch},
		{"name of another model", a, "w2", ErrModelMismatch},
		{"prefix of another model's name", a, "z", ErrNotFound},
		{"empty name", a, "", ErrInvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := db.GetArtifact(c.model, c.art); !errors.Is(err, c.want) {
				t.Fatalf("GetArtifact: %v, want %v", err, c.want)
			}
			if _, err := db.StatArtifact(c.model, c.art); !errors.Is(err, c.want) {
				t.Fatalf("StatArtifact: %v, want %v", err, c.want)
			}
			if err := db.DeleteArtifact(c.model, c.art); !errors.Is(err, c.want) {
				t.Fatalf("DeleteArtifact: %v, want %v", err, c.want)
			}
		})
	}
	if _, err := db.GetArtifact(b, "w"); err == nil || !strings.Contains(err.Error(), a.Short()) {
		t.Fatalf("mismatch error should name the model that has it: %v", err)
	}
	for _, c := range []struct {
		name string
		art  string
		data []byte
		meta ArtifactMeta
	}{
		{"empty name", "", nil, ArtifactMeta{}},
		{"long name", strings.Repeat("n", format.MaxNameLen+1), nil, ArtifactMeta{}},
		{"too large", "big", make([]byte, MaxArtifactSize+1), ArtifactMeta{}},
		{"shape without dtype", "x", []byte{1}, ArtifactMeta{Shape: []int{1}}},
		{"shape too small", "x", make([]byte, 8), ArtifactMeta{DType: format.DTypeF32, Shape: []int{1}}},
		{"negative dim", "x", nil, ArtifactMeta{DType: format.DTypeF32, Shape: []int{-1, 0}}},
		{"huge dim", "x", nil, ArtifactMeta{DType: format.DTypeF32, Shape: []int{0, hugeDim}}},
		{"rank 9", "x", nil, ArtifactMeta{DType: format.DTypeF32, Shape: make([]int, 9)}},
		{"bad dtype", "x", nil, ArtifactMeta{DType: 77}},
		{"long note", "x", nil, ArtifactMeta{Note: strings.Repeat("n", format.MaxNameLen+1)}},
	} {
		t.Run("put "+c.name, func(t *testing.T) {
			if err := db.PutArtifact(a, c.art, c.data, c.meta); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("PutArtifact: %v, want ErrInvalidArgument", err)
			}
		})
	}
	if err := db.PutArtifact(a, "max", make([]byte, 16), ArtifactMeta{DType: format.DTypeF32, Shape: []int{2, 2}}); err != nil {
		t.Fatalf("PutArtifact of a [2 2] f32: %v", err)
	}
}

// TestArtifactCorruption damages stored records: a flipped bit fails the
// frame's CRC, and a well-framed record under another key is refused.
func TestArtifactCorruption(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	a := format.Fingerprint{1}
	if err := db.PutArtifact(a, "w", []byte("weights"), ArtifactMeta{}); err != nil {
		t.Fatal(err)
	}
	var v []byte
	if _, err := db.cat.Get(catalog.ArtifactKey(a, "w"), func(b []byte) error { v = bytes.Clone(b); return nil }); err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(v)
	flipped[len(flipped)-2] ^= 1
	if err := db.cat.DB.Set(catalog.ArtifactKey(a, "w"), flipped, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetArtifact(a, "w"); !errors.Is(err, ErrCorruption) {
		t.Fatalf("flipped bit: %v, want ErrCorruption", err)
	}
	if err := db.cat.DB.Set(catalog.ArtifactKey(a, "v"), v, nil); err != nil { // w's record under v
		t.Fatal(err)
	}
	if _, err := db.GetArtifact(a, "v"); !errors.Is(err, ErrCorruption) {
		t.Fatalf("record under another name: %v, want ErrCorruption", err)
	}
}

func TestArtifactReadOnly(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, nil)
	if err := db.PutArtifact(format.Fingerprint{1}, "w", []byte{1}, ArtifactMeta{}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openMem(t, fs, &Options{ReadOnly: true})
	defer db.Close()
	if got, err := db.GetArtifact(format.Fingerprint{1}, "w"); err != nil || !bytes.Equal(got, []byte{1}) {
		t.Fatalf("read-only get: %v, %v", got, err)
	}
	if err := db.PutArtifact(format.Fingerprint{1}, "x", nil, ArtifactMeta{}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only put: %v", err)
	}
	if err := db.DeleteArtifact(format.Fingerprint{1}, "w"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only delete: %v", err)
	}
}
