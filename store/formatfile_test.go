package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// formatStore is a closed store in fs at /db holding one packet.
func formatStore(t *testing.T) (vfs.FS, *Packet, format.PacketID) {
	t.Helper()
	fs := vfs.NewMem()
	db := openMem(t, fs, &Options{Logger: quiet})
	p := randPacket(testSpec(format.DTypeF32, 2, 1, 8), "ns", 5, 3)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return fs, p, id
}

// refusedForFormat requires err to be the refusal of a store without a
// good FORMAT file: ErrCorruption, naming kvstore recover.
func refusedForFormat(t *testing.T, where string, err error) {
	t.Helper()
	if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "kvstore recover") {
		t.Fatalf("%s: %v, want ErrCorruption naming kvstore recover", where, err)
	}
}

// TestFormatTruncated truncates each copy of FORMAT to every shorter
// length and extends it by a byte: both opens serve the store from the
// other copy, and a read-write open rewrites it. Both copies truncated is
// refused, and RecoverFormat writes them again.
func TestFormatTruncated(t *testing.T) {
	good := format.EncodeFormatFile(format.Current)
	lengths := []int{len(good) + 1}
	for n := range len(good) {
		lengths = append(lengths, n)
	}
	for _, name := range []string{formatFileName, formatCopyName} {
		for _, n := range lengths {
			fs, p, id := formatStore(t)
			damaged := append(bytes.Clone(good), 0)[:n]
			writeFile(t, fs, "/db/"+name, damaged)
			for _, readOnly := range []bool{true, false} {
				db, err := Open("/db", &Options{FS: fs, ReadOnly: readOnly, Logger: quiet})
				if err != nil {
					t.Fatalf("%s of %d bytes, read-only %v: %v", name, n, readOnly, err)
				}
				if out, err := readBack(db, p, id); out != readExact {
					t.Fatalf("%s of %d bytes, read-only %v: %v (%v)", name, n, readOnly, out, err)
				}
				db.Close()
				if b := readFile(t, fs, "/db/"+name); readOnly != !bytes.Equal(b, good) {
					t.Fatalf("%s of %d bytes, after a read-only %v open: %x", name, n, readOnly, b)
				}
			}
		}
	}
	fs, p, id := formatStore(t)
	for _, name := range []string{formatFileName, formatCopyName} {
		writeFile(t, fs, "/db/"+name, good[:7])
	}
	for _, readOnly := range []bool{true, false} {
		_, err := Open("/db", &Options{FS: fs, ReadOnly: readOnly, Logger: quiet})
		refusedForFormat(t, fmt.Sprintf("both truncated, read-only %v", readOnly), err)
	}
	rep, err := RecoverFormat("/db", &Options{FS: fs})
	if err != nil || !rep.Rewritten || !rep.FromBlobs || rep.BlobHeaders != 1 || rep.Version != format.Current || len(rep.Found) != 2 {
		t.Fatalf("RecoverFormat: %+v, %v", rep, err)
	}
	db := openMem(t, fs, &Options{ReadOnly: true, Logger: quiet})
	defer db.Close()
	if out, err := readBack(db, p, id); out != readExact {
		t.Fatalf("after RecoverFormat: %v (%v)", out, err)
	}
}

// TestFormatVersionOnOpen: a store at an older minor stays there through
// a read-only open and moves to format.Current at a read-write one; a
// newer minor is served and written, and never written down; a newer
// major is refused by both, and left as it is.
func TestFormatVersionOnOpen(t *testing.T) {
	for _, tc := range []struct {
		name      string
		v         format.Version
		want      format.Version // after a read-write open
		refused   error
		withCopy  bool
		copyAfter bool
	}{
		{"1.0", format.Version10, format.Current, nil, false, true},
		{"1.1", format.Version11, format.Current, nil, false, true},
		{"current", format.Current, format.Current, nil, true, true},
		{"newer minor", format.Version{Major: format.FormatMajor, Minor: format.FormatMinor + 1}, format.Version{Major: format.FormatMajor, Minor: format.FormatMinor + 1}, nil, true, true},
		{"newer major", format.Version{Major: format.FormatMajor + 1}, format.Version{Major: format.FormatMajor + 1}, ErrVersion, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, p, id := formatStore(t)
			writeFile(t, fs, "/db/"+formatFileName, format.EncodeFormatFile(tc.v))
			if tc.withCopy {
				writeFile(t, fs, "/db/"+formatCopyName, format.EncodeFormatFile(tc.v))
			} else if err := fs.Remove("/db/" + formatCopyName); err != nil {
				t.Fatal(err)
			}
			for _, readOnly := range []bool{true, false} {
				db, err := Open("/db", &Options{FS: fs, ReadOnly: readOnly, Logger: quiet})
				if tc.refused != nil {
					if !errors.Is(err, tc.refused) {
						t.Fatalf("read-only %v: %v, want %v", readOnly, err, tc.refused)
					}
					continue
				}
				if err != nil {
					t.Fatalf("read-only %v: %v", readOnly, err)
				}
				if out, err := readBack(db, p, id); out != readExact {
					t.Fatalf("read-only %v: %v (%v)", readOnly, out, err)
				}
				db.Close()
				want, wantCopy := tc.v, tc.withCopy
				if !readOnly {
					want, wantCopy = tc.want, tc.copyAfter
				}
				if b := readFile(t, fs, "/db/"+formatFileName); !bytes.Equal(b, format.EncodeFormatFile(want)) {
					t.Fatalf("FORMAT after a read-only %v open: %x, want %v", readOnly, b, want)
				}
				_, err = fs.Stat("/db/" + formatCopyName)
				if wantCopy != (err == nil) {
					t.Fatalf("FORMAT.copy after a read-only %v open: %v", readOnly, err)
				}
				if wantCopy {
					if b := readFile(t, fs, "/db/"+formatCopyName); !bytes.Equal(b, format.EncodeFormatFile(want)) {
						t.Fatalf("FORMAT.copy after a read-only %v open: %x, want %v", readOnly, b, want)
					}
				}
			}
			if tc.refused != nil {
				if b := readFile(t, fs, "/db/"+formatFileName); !bytes.Equal(b, format.EncodeFormatFile(tc.v)) {
					t.Fatalf("a refused open changed FORMAT to %x", b)
				}
			}
		})
	}
}

// TestFrozenFormatDamaged flips a bit of the FORMAT file of the stores
// written before 1.2, which have no FORMAT.copy: Open refuses them naming
// kvstore recover; RecoverFormat writes FORMAT again from the blob files'
// headers, at the version that wrote them, and keeps the catalog, so that
// every packet, artifact and span memory is served as before. Recover
// repairs FORMAT the same way before it rebuilds the catalog.
func TestFrozenFormatDamaged(t *testing.T) {
	for _, v := range frozenVersions[:2] {
		t.Run(v.String(), func(t *testing.T) {
			for _, recoverAll := range []bool{false, true} {
				dir, m := frozenStore(t, v)
				path := filepath.Join(dir, formatFileName)
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				b[9] ^= 0x10
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
				for _, readOnly := range []bool{true, false} {
					_, err := Open(dir, &Options{ReadOnly: readOnly, Logger: quiet})
					refusedForFormat(t, fmt.Sprintf("read-only %v", readOnly), err)
				}
				var rep *FormatReport
				if recoverAll {
					r, err := Recover(dir, &Options{Logger: quiet})
					if err != nil {
						t.Fatalf("Recover: %v", err)
					}
					rep = &r.Format
				} else if rep, err = RecoverFormat(dir, nil); err != nil {
					t.Fatalf("RecoverFormat: %v", err)
				}
				if !rep.Rewritten || !rep.FromBlobs || rep.BlobHeaders != 1 || rep.Version != v || len(rep.Found) != 2 {
					t.Fatalf("recover all %v: the FORMAT report %+v", recoverAll, rep)
				}
				if main, copy := formatFiles(t, dir); main != v || copy != v {
					t.Fatalf("recover all %v: FORMAT %v, FORMAT.copy %v; want %v", recoverAll, main, copy, v)
				}
				db, err := Open(dir, &Options{ReadOnly: true, Logger: quiet})
				if err != nil {
					t.Fatalf("recover all %v: open: %v", recoverAll, err)
				}
				checkFrozen(t, db, m, v, recoverAll)
				db.Close()
			}
		})
	}
}
