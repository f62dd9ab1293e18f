package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
	"github.com/kvstore/kvstore/store"
)

// Export then import into another store gives the same packet: same id,
// same header (but its creation time and place), same bytes.
func TestExportImportRoundTrip(t *testing.T) {
	dir, ids := testStore(t)
	file := filepath.Join(t.TempDir(), "p.safetensors")
	r := kv(t, "--dir", dir, "export", ids[1].String()[:8], file).want(t, exitOK)
	if !strings.Contains(r.stdout, "exported "+ids[1].String()) || r.stderr != "" {
		t.Fatalf("export: %q %q", r.stdout, r.stderr)
	}
	checkExportedFile(t, file, ids[1])

	dst := t.TempDir()
	var out importOutput
	r = kv(t, "--dir", dst, "--create", "--json", "import", file).want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.ID != ids[1].String() || out.Stored {
		t.Fatalf("import: %v %+v", err, out)
	}
	a, b := header(t, dir, ids[1]), header(t, dst, ids[1])
	for _, h := range []*format.PacketHeader{a, b} { // all but time and place
		h.CreatedUnixNs = 0
		for i := range h.Chunks {
			h.Chunks[i].Offset -= h.ExtentOffset
		}
		h.ExtentOffset = 0
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("headers differ:\n%+v\n%+v", a, b)
	}
	if !bytes.Equal(packetBytes(t, dir, a), packetBytes(t, dst, b)) {
		t.Fatal("imported bytes differ")
	}
	r = kv(t, "--dir", dst, "import", file).want(t, exitOK)
	if !strings.Contains(r.stdout, "already stored") {
		t.Fatalf("second import: %s", r.stdout)
	}
	// Another namespace is another packet.
	r = kv(t, "--dir", dst, "--json", "import", "--ns", "other", file).want(t, exitOK)
	out = importOutput{}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.ID == ids[1].String() || out.Namespace != "other" {
		t.Fatalf("import --ns: %v %+v", err, out)
	}
	kv(t, "--dir", dst, "verify").want(t, exitOK)
}

func checkExportedFile(t *testing.T, file string, id format.PacketID) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	kvT := f.Tensor(safetensors.NameKV)
	if kvT == nil || kvT.DType != safetensors.BF16 || !reflect.DeepEqual(kvT.Shape, []uint64{2, 2, 1, 2, 5, 4}) ||
		f.Metadata[safetensors.MetaPacketID] != id.String() || f.Metadata[safetensors.MetaTokenIDs] != "[200,201,202,203]" {
		t.Fatalf("exported file: %+v, %v", kvT, f.Metadata)
	}
}

// packetBytes reads every chunk of packet h through a view.
func packetBytes(t *testing.T, dir string, h *format.PacketHeader) []byte {
	t.Helper()
	db, err := store.Open(dir, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v, err := db.Get(context.Background(), h.Namespace, h.Model, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	var all []byte
	for i := range h.Chunks {
		c, err := v.Chunk(i)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, c...)
	}
	return all
}

// A byte flipped in the middle of a chunk fails export, whose copies take
// each chunk's CRC as they copy it: the error names the chunk, and no file
// is left behind.
func TestExportCorrupt(t *testing.T) {
	dir, ids := testStore(t)
	h := header(t, dir, ids[1])
	c := h.Chunks[2] // layer 1 K
	blob := filepath.Join(dir, "blobs", fmt.Sprintf("%06d.blob", c.BlobFile))
	flipByte(t, blob, int64(c.Offset+c.Length/2))
	file := filepath.Join(t.TempDir(), "x.safetensors")
	r := kv(t, "--dir", dir, "export", ids[1].String(), file).want(t, exitFail)
	if want := fmt.Sprintf("offset %d", c.Offset); !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "layer 1 K") {
		t.Fatalf("export over a flipped byte: stderr %q lacks %q and layer 1 K", r.stderr, want)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("export left %s: %v", file, err)
	}
}

// export refuses to replace an existing file unless --force (it used to
// overwrite it silently), and into a directory writes <id>.safetensors
// there (it used to fail with a rename error naming its temporary file);
// a refused export leaves the file as it was and no temporary file.
func TestExportExistingFileAndDirectory(t *testing.T) {
	dir, ids := testStore(t)
	out := t.TempDir()
	file := filepath.Join(out, "p.safetensors")
	if err := os.WriteFile(file, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := kv(t, "--dir", dir, "export", ids[1].String()[:8], file).want(t, exitFail)
	if !strings.Contains(r.stderr, "--force") || !strings.Contains(r.stderr, "exists") {
		t.Fatalf("export over a file: %q, want a refusal naming --force", r.stderr)
	}
	if b, _ := os.ReadFile(file); string(b) != "mine" {
		t.Fatalf("a refused export changed the file: %q", b)
	}
	kv(t, "--dir", dir, "export", "--force", ids[1].String()[:8], file).want(t, exitOK)
	checkExportedFile(t, file, ids[1])

	for _, target := range []string{out, out + string(filepath.Separator)} {
		want := filepath.Join(out, ids[1].String()+".safetensors")
		os.Remove(want)
		var res exportOutput
		r = kv(t, "--dir", dir, "--json", "export", ids[1].String()[:8], target).want(t, exitOK)
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.File != want {
			t.Fatalf("export into %s: %v, %+v, want file %s", target, err, res, want)
		}
		checkExportedFile(t, want, ids[1])
	}
	r = kv(t, "--dir", dir, "export", ids[1].String()[:8], out).want(t, exitFail)
	if !strings.Contains(r.stderr, ids[1].String()+".safetensors") || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("second export into the directory: %q", r.stderr)
	}
	r = kv(t, "--dir", dir, "export", ids[1].String()[:8], filepath.Join(out, "nodir")+"/").want(t, exitFail)
	if strings.Contains(r.stderr, ".tmp") {
		t.Fatalf("export into a missing directory names a temporary file: %q", r.stderr)
	}
	names, _ := os.ReadDir(out)
	for _, n := range names {
		if strings.Contains(n.Name(), ".tmp") {
			t.Fatalf("left %s", n.Name())
		}
	}
}

// place, without replace, never overwrites a file that appeared after the
// check; with it, it does.
func TestExportPlaceNoClobber(t *testing.T) {
	d := t.TempDir()
	tmp, name := filepath.Join(d, "tmp"), filepath.Join(d, "name")
	for _, f := range []string{tmp, name} {
		if err := os.WriteFile(f, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := place(tmp, name, false); !errors.Is(err, os.ErrExist) {
		t.Fatalf("place over a file: %v, want ErrExist", err)
	}
	if b, _ := os.ReadFile(name); string(b) != name {
		t.Fatalf("place without replace changed the file: %q", b)
	}
	if err := place(tmp, name, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(name); string(b) != tmp {
		t.Fatalf("place with replace: %q", b)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("tmp left: %v", err)
	}
}
