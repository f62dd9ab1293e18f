package store

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// A blob file whose intact header (CRC resealed) claims a newer format
// major, names another file or is no blob header is refused before any of
// its extents is served, by Get and by Assemble. A damaged header (its CRC
// fails) is not: the extents carry their own checksums and read back
// exact (TestReliabilityFlipBlobFiles flips every header bit).
func TestBlobHeaderChecked(t *testing.T) {
	spec := &format.ModelSpec{Architecture: "llama", Layers: 2, KVHeads: 1, HeadDim: 8, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}, WeightsID: "blob-header"}
	reseal := func(b []byte) { binary.LittleEndian.PutUint32(b[16:], format.CRC(b[:16])) }
	for _, tc := range []struct {
		name  string
		patch func(b []byte)
		want  error
	}{
		{"newer major", func(b []byte) { binary.LittleEndian.PutUint16(b[8:], format.FormatMajor+1); reseal(b) }, ErrVersion},
		{"other file number", func(b []byte) { binary.LittleEndian.PutUint32(b[12:], 7); reseal(b) }, ErrCorruption},
		{"damaged, served", func(b []byte) { b[13] ^= 1 }, nil},
		{"bad magic", func(b []byte) { b[0] ^= 1; reseal(b) }, ErrCorruption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			id, err := db.Put(context.Background(), floatPacket(spec, "ns", 16, 0, 0, 3))
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, blobsDirName, "000001.blob")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tc.patch(b[:format.BlobHeaderSize])
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if db, err = Open(dir, &Options{ReadOnly: true}); err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id)
			if err == nil {
				_, err = v.Chunk(0)
				v.Release()
			}
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Get: %v, want %v", err, tc.want)
			}
			err = db.Assemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ID: id}}, NewContiguousDest(spec, 16), nil)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Assemble: %v, want %v", err, tc.want)
			}
		})
	}
}

// A store that lost both its FORMAT files is not a new store: Open
// refuses it with ErrCorruption naming the remedy instead of writing a new
// FORMAT over its blob files or its catalog, and leaves every file as it
// was; RecoverFormat writes them again, keeping the catalog. A store that
// lost one is opened, and a read-write open writes it again.
func TestMissingFormatIsCorruption(t *testing.T) {
	spec := &format.ModelSpec{Architecture: "llama", Layers: 2, KVHeads: 1, HeadDim: 8, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}, WeightsID: "no-format"}
	both := []string{formatFileName, formatCopyName}
	for _, tc := range []struct {
		name   string
		remove []string
		opens  bool
	}{
		{"blob files and catalog", both, false},
		{"catalog only", append([]string{blobsDirName}, both...), false},
		{"FORMAT only", []string{formatFileName}, true},
		{"FORMAT.copy only", []string{formatCopyName}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			id, err := db.Put(context.Background(), floatPacket(spec, "ns", 8, 0, 0, 5))
			if err != nil {
				t.Fatal(err)
			}
			if err := db.PutArtifact(spec.Fingerprint(), "kept", []byte("artifact"), ArtifactMeta{}); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.remove {
				if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
					t.Fatal(err)
				}
			}
			for _, readOnly := range []bool{true, false} {
				db, err := Open(dir, &Options{ReadOnly: readOnly})
				if err == nil {
					db.Close()
				}
				switch {
				case tc.opens && err != nil:
					t.Fatalf("Open, read-only %v: %v", readOnly, err)
				case tc.opens:
				case readOnly && tc.remove[0] == blobsDirName:
					// Without blob files only the catalog's records tell a
					// lost store from an interrupted creation, and a
					// read-only open does not scan them.
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("Open without FORMAT and blob files, read-only: %v, want ErrNotFound", err)
					}
				case !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "kvstore recover"):
					t.Fatalf("Open without FORMAT, read-only %v: %v, want ErrCorruption naming kvstore recover", readOnly, err)
				}
			}
			for _, name := range both {
				_, err := os.Stat(filepath.Join(dir, name))
				if tc.opens && err != nil {
					t.Fatalf("%s after a read-write open: %v", name, err)
				}
				if !tc.opens && !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("Open wrote %s over the old store: %v", name, err)
				}
			}
			if tc.opens {
				return
			}
			rep, err := RecoverFormat(dir, nil)
			if err != nil || !rep.Rewritten || !rep.FromBlobs || rep.Version != format.Current {
				t.Fatalf("RecoverFormat: %+v, %v", rep, err)
			}
			if tc.remove[0] == blobsDirName {
				if rep.BlobHeaders != 0 {
					t.Fatalf("RecoverFormat read %d blob headers of none", rep.BlobHeaders)
				}
				return // a store without its blob files: its packet is gone
			}
			db, err = Open(dir, &Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("Open after RecoverFormat: %v", err)
			}
			defer db.Close()
			if ok, err := db.Has(context.Background(), "ns", spec.Fingerprint(), id); !ok || err != nil {
				t.Fatalf("the packet after RecoverFormat: %v, %v", ok, err)
			}
			if b, err := db.GetArtifact(spec.Fingerprint(), "kept"); err != nil || string(b) != "artifact" {
				t.Fatalf("the artifact after RecoverFormat: %q, %v", b, err)
			}
		})
	}
	// An empty directory, or one holding only what a crashed creation
	// leaves (an empty blobs/), is still created.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, blobsDirName), 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("Open over an interrupted creation: %v", err)
	}
	db.Close()
}
