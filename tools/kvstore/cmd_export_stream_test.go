package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// The exported file is 0644 (a file for others to read, as cp makes it),
// and nothing else is left in its directory, after a success or a failure.
func TestExportFileMode(t *testing.T) {
	dir, ids := testStore(t)
	out := t.TempDir()
	file := filepath.Join(out, "p.safetensors")
	kv(t, "--dir", dir, "export", ids[1].String(), file).want(t, exitOK)
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", st.Mode().Perm())
	}
	kv(t, "--dir", dir, "export", ids[1].String(), filepath.Join(out, "missing", "p.safetensors")).want(t, exitFail)
	if names := dirNames(t, out); len(names) != 1 || names[0] != "p.safetensors" {
		t.Fatalf("left in %s: %q", out, names)
	}
}

// bigPacket is a packet of about mib MiB: 16 layers, 8 KV heads, head
// dim 128, bf16 (64 KiB per token).
func bigPacket(mib int) *store.Packet {
	m := &format.ModelSpec{Architecture: "llama", Layers: 16, KVHeads: 8, HeadDim: 128, DType: format.DTypeBF16,
		WeightsID: "big", RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}}
	p := &store.Packet{PacketDesc: format.PacketDesc{Namespace: "big", Model: m}}
	for i := range mib * 16 {
		p.TokenIDs = append(p.TokenIDs, uint32(i))
	}
	size := m.KVHeads * p.Tokens() * m.HeadDim * m.DType.Size()
	for l := range m.Layers {
		k, v := make([]byte, size), make([]byte, size)
		for b := range size {
			k[b], v[b] = byte(l+b), byte(l+b*7)
		}
		p.Layers = append(p.Layers, store.Layer{K: k, V: v})
	}
	return p
}

// allocated returns the bytes fn allocates on the heap.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// Export and import of a 32 MiB packet allocate a few MiB, not the
// packet: export streams one layer at a time, import maps the file.
func TestExportImportBoundedMemory(t *testing.T) {
	const mib = 32
	dir := t.TempDir()
	db, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.Put(context.Background(), bigPacket(mib))
	if err != nil {
		t.Fatal(err)
	}
	h := header2(t, db, id)
	file := filepath.Join(t.TempDir(), "p.safetensors")
	var n int64
	alloc := allocated(func() { n, err = exportPacket(context.Background(), db, h, file, false, &progress{}) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("export of %d bytes allocated %d bytes", n, alloc)
	if n < mib<<20 || alloc > 8<<20 {
		t.Errorf("export of %d bytes allocated %d bytes", n, alloc)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	dst, err := store.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	alloc = allocated(func() {
		var p *store.Packet
		var release func()
		if p, release, err = readPacket(file); err == nil {
			_, err = dst.Put(context.Background(), p)
			release()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("import of %d bytes allocated %d bytes", n, alloc)
	if alloc > 8<<20 {
		t.Errorf("import of %d bytes allocated %d bytes", n, alloc)
	}
	if rep, err := dst.Verify(context.Background(), store.VerifyOptions{}); err != nil || !rep.OK() {
		t.Fatalf("verify after import: %v %+v", err, rep)
	}
}

// header2 is header for an open store.
func header2(t *testing.T, db *store.DB, id format.PacketID) *format.PacketHeader {
	t.Helper()
	var h *format.PacketHeader
	if err := db.Headers(func(x *format.PacketHeader) error {
		if x.ID == id {
			h = x
		}
		return nil
	}); err != nil || h == nil {
		t.Fatalf("header of %s: %v", id.Short(), err)
	}
	return h
}

// A cancelled export (SIGINT) stops and removes its temporary file.
func TestExportCancelled(t *testing.T) {
	dir, ids := testStore(t)
	db, err := store.Open(dir, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := exportPacket(ctx, db, header2(t, db, ids[0]), filepath.Join(out, "p.safetensors"), false, &progress{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("export under a cancelled context: %v", err)
	}
	if names := dirNames(t, out); len(names) != 0 {
		t.Fatalf("left in %s: %q", out, names)
	}
}

// dirNames lists dir, dot files included (the temporary file is one).
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
