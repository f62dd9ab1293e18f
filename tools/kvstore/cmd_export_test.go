package main

import (
	"bytes"
	"context"
	"encoding/json"
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
