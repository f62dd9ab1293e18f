package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

func putFile(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
}

func getFile(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFormatFile(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	if f, err := ReadFormat(fs, "db"); f.Exists || f.Found || err != nil {
		t.Fatalf("no FORMAT: %+v, %v", f, err)
	}
	if err := WriteFormat(fs, "db", format.Current); err != nil {
		t.Fatal(err)
	}
	if f, err := ReadFormat(fs, "db"); !f.Found || f.Version != format.Current || len(f.Bad) != 0 || f.Stale(format.Current) || err != nil {
		t.Fatalf("written FORMAT: %+v, %v", f, err)
	}
	for _, name := range []string{FormatFileName, FormatCopyName} {
		if b := getFile(t, fs, "db/"+name); !bytes.Equal(b, format.EncodeFormatFile(format.Current)) {
			t.Fatalf("%s holds %x", name, b)
		}
	}
	if _, err := fs.Stat("db/" + FormatTmpName); err == nil {
		t.Fatal("temporary file left after WriteFormat")
	}
	putFile(t, fs, "db/FORMAT", format.EncodeFormatFile(format.Version{Major: format.FormatMajor + 1}))
	if _, err := ReadFormat(fs, "db"); !errors.Is(err, format.ErrVersion) {
		t.Fatalf("newer major in FORMAT: %v, want ErrVersion", err)
	}
	putFile(t, fs, "db/FORMAT", []byte("garbage"))
	putFile(t, fs, "db/FORMAT.copy", format.EncodeFormatFile(format.Version{Major: format.FormatMajor + 1}))
	if _, err := ReadFormat(fs, "db"); !errors.Is(err, format.ErrVersion) {
		t.Fatalf("newer major in FORMAT.copy: %v, want ErrVersion", err)
	}
	putFile(t, fs, "db/FORMAT.copy", []byte("garbage"))
	f, err := ReadFormat(fs, "db")
	if !errors.Is(err, format.ErrCorruption) || f.Found || !f.Exists {
		t.Fatalf("both bad: %+v, %v, want ErrCorruption", f, err)
	}
	for _, name := range []string{FormatFileName, FormatCopyName} {
		if !strings.Contains(err.Error(), name+": ") {
			t.Fatalf("both bad: %q does not say what is wrong with %s", err, name)
		}
	}
}

// One damaged copy of FORMAT (any bit flipped, truncated, extended,
// removed) leaves the other trusted, and says which copy to rewrite.
func TestFormatFileOneCopyDamaged(t *testing.T) {
	good := format.EncodeFormatFile(format.Current)
	type damage struct {
		name string
		b    []byte // nil: the file is removed
	}
	var damages []damage
	for bit := range 8 * len(good) {
		b := bytes.Clone(good)
		b[bit/8] ^= 1 << (bit % 8)
		damages = append(damages, damage{fmt.Sprintf("bit %d", bit), b})
	}
	for n := range len(good) {
		damages = append(damages, damage{fmt.Sprintf("%d bytes", n), good[:n]})
	}
	damages = append(damages, damage{"21 bytes", append(bytes.Clone(good), 0)}, damage{"removed", nil})
	for _, name := range []string{FormatFileName, FormatCopyName} {
		for _, d := range damages {
			fs := vfs.NewMem()
			if err := WriteFormat(fs, "/", format.Current); err != nil {
				t.Fatal(err)
			}
			if d.b == nil {
				if err := fs.Remove(name); err != nil {
					t.Fatal(err)
				}
			} else {
				putFile(t, fs, name, d.b)
			}
			f, err := ReadFormat(fs, "/")
			if err != nil || !f.Found || f.Version != format.Current || len(f.Bad) != 1 || !strings.HasPrefix(f.Bad[0], name+": ") ||
				!f.Stale(format.Current) {
				t.Fatalf("%s %s: %+v, %v", name, d.name, f, err)
			}
		}
	}
}

// The copies' versions: a store before 1.2 has FORMAT only and nothing is
// bad but its version; copies of different versions give the newer one
// and name the older copy.
func TestFormatFileVersions(t *testing.T) {
	older := format.Version11
	for _, tc := range []struct {
		name       string
		main, copy []byte // nil: absent
		want       format.Version
		bad        string // the prefix of the one Bad line, "" for none
	}{
		{"1.1 store", format.EncodeFormatFile(older), nil, older, ""},
		{"1.1 store lost FORMAT", nil, format.EncodeFormatFile(older), older, "FORMAT: missing"},
		{"stopped between the copies", format.EncodeFormatFile(format.Current), format.EncodeFormatFile(older), format.Current, "FORMAT.copy: version 1.1"},
		{"stopped between the copies, copy newer", format.EncodeFormatFile(older), format.EncodeFormatFile(format.Current), format.Current, "FORMAT: version 1.1"},
		{"1.2 store lost its copy", format.EncodeFormatFile(format.Version12), nil, format.Version12, "FORMAT.copy: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			for _, f := range []struct {
				name string
				b    []byte
			}{{FormatFileName, tc.main}, {FormatCopyName, tc.copy}} {
				if f.b != nil {
					putFile(t, fs, f.name, f.b)
				}
			}
			f, err := ReadFormat(fs, "/")
			if err != nil || !f.Found || f.Version != tc.want {
				t.Fatalf("%+v, %v, want version %v", f, err, tc.want)
			}
			if tc.bad == "" && len(f.Bad) != 0 || tc.bad != "" && (len(f.Bad) != 1 || !strings.HasPrefix(f.Bad[0], tc.bad)) {
				t.Fatalf("bad %q, want %q", f.Bad, tc.bad)
			}
			if tc.want.Compare(format.Current) < 0 && !f.Stale(format.Current) {
				t.Fatalf("a %v store is not stale for %v", tc.want, format.Current)
			}
		})
	}
}

// BlobVersion reads the newest version an intact blob header names,
// skips damaged ones, and refuses a newer major.
func TestBlobVersion(t *testing.T) {
	fs := vfs.NewMem()
	if v, n, err := BlobVersion(fs, "/blobs"); n != 0 || err != nil {
		t.Fatalf("no blobs directory: %v, %d, %v", v, n, err)
	}
	if err := fs.MkdirAll("/blobs", 0o755); err != nil {
		t.Fatal(err)
	}
	putFile(t, fs, "/blobs/000001.blob", format.EncodeBlobHeader(1))
	damaged := format.EncodeBlobHeader(2)
	damaged[3] ^= 1
	putFile(t, fs, "/blobs/000002.blob", damaged)
	putFile(t, fs, "/blobs/notes", []byte("not a blob file"))
	if v, n, err := BlobVersion(fs, "/blobs"); v != format.Current || n != 1 || err != nil {
		t.Fatalf("one intact header: %v, %d, %v", v, n, err)
	}
	if err := LostFormat(fs, "/", "blobs"); !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("LostFormat with blob files: %v", err)
	}
	newer := format.EncodeBlobHeader(3)
	binary.LittleEndian.PutUint16(newer[8:], format.FormatMajor+1)
	binary.LittleEndian.PutUint32(newer[16:], format.CRC(newer[:16]))
	putFile(t, fs, "/blobs/000003.blob", newer)
	if _, _, err := BlobVersion(fs, "/blobs"); !errors.Is(err, format.ErrVersion) {
		t.Fatalf("a newer major: %v, want ErrVersion", err)
	}
	if err := LostFormat(fs, "/", "none"); err != nil {
		t.Fatalf("LostFormat without blob files: %v", err)
	}
}

func TestCheckLeftovers(t *testing.T) {
	fs := vfs.NewMem()
	_ = fs.MkdirAll("db/catalog", 0o755)
	putFile(t, fs, "db/LOCK", nil)
	if err := CheckLeftovers(fs, "db", "LOCK", "catalog", "blobs", FormatTmpName); err != nil {
		t.Fatalf("interrupted creation refused: %v", err)
	}
	putFile(t, fs, "db/notes.txt", nil)
	if err := CheckLeftovers(fs, "db", "LOCK", "catalog", "blobs", FormatTmpName); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("foreign file: %v, want ErrInvalidArgument", err)
	}
}
