package artifact

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// TestDecodeRejects: a body that breaks the format in any field is
// ErrCorruption; a good one decodes.
func TestDecodeRejects(t *testing.T) {
	good := Encode(format.Fingerprint{3}, "name", []byte{1, 2, 3, 4}, &format.ArtifactMeta{DType: format.DTypeBF16, Shape: []int{2}, Note: "n"}, 5)
	if info, err := Decode(good); err != nil || info.Name != "name" || info.Size != 4 || info.Meta.Note != "n" {
		t.Fatalf("decode good: %+v, %v", info, err)
	}
	cases := []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:format.ArtifactFixedSize-1] }},
		{"truncated data", func(b []byte) []byte { return b[:len(b)-1] }},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }},
		{"reserved", func(b []byte) []byte { b[54] = 1; return b }},
		{"rank", func(b []byte) []byte { b[53] = format.MaxArtifactRank + 1; return b }},
		{"data len", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[40:], 1<<62); return b }},
		{"shape vs data", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[format.ArtifactFixedSize:], 3); return b }},
		{"dtype", func(b []byte) []byte { b[52] = 200; return b }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Decode(c.edit(bytes.Clone(good))); !errors.Is(err, ErrCorruption) {
				t.Fatalf("decode: %v, want ErrCorruption", err)
			}
		})
	}
}

// FuzzDecode: decoding never panics, and whatever decodes
// re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	good := Encode(format.Fingerprint{3}, "adapter/header", []byte{1, 2, 3, 4}, &format.ArtifactMeta{DType: format.DTypeBF16, Shape: []int{2}, Note: "n"}, 5)
	f.Add(good)
	f.Add(Encode(format.Fingerprint{}, "x", nil, &format.ArtifactMeta{}, 0))
	f.Add(good[:format.ArtifactFixedSize])
	bad := bytes.Clone(good)
	bad[53] = 9
	f.Add(bad)
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("error %v does not wrap ErrCorruption", err)
			}
			return
		}
		again := Encode(info.Model, info.Name, b[len(b)-info.Size:], &info.Meta, info.CreatedAt.UnixNano())
		if !bytes.Equal(again, b) {
			t.Fatalf("decoded %+v re-encodes differently", info)
		}
	})
}

// TestCheck: names of 1 to MaxNameLen bytes, data up to MaxArtifactSize
// and meta that accounts for the data are accepted; anything else is
// ErrInvalidArgument.
func TestCheck(t *testing.T) {
	meta := &format.ArtifactMeta{DType: format.DTypeF32, Shape: []int{2}}
	if err := Check("w", make([]byte, 8), meta); err != nil {
		t.Fatalf("good artifact: %v", err)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"no name", Check("", nil, &format.ArtifactMeta{})},
		{"long name", CheckName(strings.Repeat("n", format.MaxNameLen+1))},
		{"too big", Check("w", make([]byte, format.MaxArtifactSize+1), &format.ArtifactMeta{})},
		{"bad meta", Check("w", make([]byte, 4), meta)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, ErrInvalidArgument) {
				t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, tc.err)
			}
		})
	}
}

// TestRead: a record reads back under its own (model, name) only; under
// another, or with a flipped byte, it is ErrCorruption.
func TestRead(t *testing.T) {
	fp := format.Fingerprint{7}
	rec, err := Record(fp, "tau", []byte{1, 2, 3}, &format.ArtifactMeta{Note: "n"}, 9)
	if err != nil {
		t.Fatal(err)
	}
	body, info, err := Read(rec, fp, "tau")
	if err != nil || info.Size != 3 || info.Meta.Note != "n" || info.CreatedAt.UnixNano() != 9 ||
		!bytes.Equal(body[len(body)-info.Size:], []byte{1, 2, 3}) {
		t.Fatalf("Read = %+v, %v", info, err)
	}
	flipped := bytes.Clone(rec)
	flipped[len(flipped)-1] ^= 1
	for _, tc := range []struct {
		name string
		try  func() error
	}{
		{"other model", func() error { _, _, err := Read(rec, format.Fingerprint{8}, "tau"); return err }},
		{"other name", func() error { _, _, err := Read(rec, fp, "tau2"); return err }},
		{"flipped", func() error { _, _, err := Read(flipped, fp, "tau"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.try(); !errors.Is(err, ErrCorruption) {
				t.Errorf("%s: %v, want ErrCorruption", tc.name, err)
			}
		})
	}
}

// TestCatalog: Set then Get, Has, List and Other find the record under its
// model, and Other names the model holding a name another model asks for;
// Delete removes record and index entry.
func TestCatalog(t *testing.T) {
	cat, err := catalog.Open("/cat", &catalog.Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 1 << 20,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	a, b := format.Fingerprint{1}, format.Fingerprint{2}
	commit := func(fn func(*pebble.Batch)) {
		t.Helper()
		batch := cat.DB.NewBatch()
		defer batch.Close()
		fn(batch)
		if err := cat.Commit(batch); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"w", "tau"} {
		rec, err := Record(a, name, []byte(name), &format.ArtifactMeta{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		commit(func(batch *pebble.Batch) { Set(batch, a, name, rec) })
	}
	var data []byte
	info, found, err := Get(cat, a, "w", func(body []byte, info *Info) { data = bytes.Clone(body[len(body)-info.Size:]) })
	if err != nil || !found || info.Name != "w" || string(data) != "w" {
		t.Fatalf("Get = %+v, %v, %v; data %q", info, found, err, data)
	}
	if _, found, err := Get(cat, b, "w", nil); err != nil || found {
		t.Fatalf("Get of another model: found %v, %v", found, err)
	}
	if other, err := Other(cat, b, "w"); err != nil || other == nil || *other != a {
		t.Fatalf("Other = %v, %v; want %s", other, err, a.Short())
	}
	if other, err := Other(cat, b, "x"); err != nil || other != nil {
		t.Fatalf("Other of an unknown name = %v, %v", other, err)
	}
	mismatch, notFound := errors.New("mismatch"), errors.New("not found")
	if err := Missing(cat, b, "w", mismatch, notFound); !errors.Is(err, mismatch) || errors.Is(err, notFound) {
		t.Errorf("Missing of a name another model has = %v, want mismatch", err)
	}
	if err := Missing(cat, b, "x", mismatch, notFound); !errors.Is(err, notFound) || errors.Is(err, mismatch) {
		t.Errorf("Missing of an unknown name = %v, want not found", err)
	}
	if names, err := List(cat, a); err != nil || strings.Join(names, ",") != "tau,w" {
		t.Fatalf("List = %v, %v", names, err)
	}
	commit(func(batch *pebble.Batch) { Delete(batch, a, "w") })
	if ok, err := Has(cat, a, "w"); err != nil || ok {
		t.Fatalf("Has after Delete: %v, %v", ok, err)
	}
	if names, err := List(cat, a); err != nil || strings.Join(names, ",") != "tau" {
		t.Fatalf("List after Delete = %v, %v", names, err)
	}
}
