package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

func TestRoundTrip(t *testing.T) {
	cases := []struct {
		dt                       format.DType
		layers, heads, dim, toks int
	}{
		{format.DTypeBF16, 4, 2, 8, 16},
		{format.DTypeF16, 3, 3, 16, 5},
		{format.DTypeF32, 2, 1, 4, 9},
		{format.DTypeBF16, 2, 2, 8, 1}, // one token
		{format.DTypeF32, 2, 2, 3, 7},  // odd head dims: chunks padded to 64 bytes
		{format.DTypeF16, 2, 3, 5, 11},
		{format.DTypeBF16, 3, 1, 7, 13},
		{format.DTypeF16, 80, 2, 4, 3}, // many layers
	}
	for _, disk := range []bool{false, true} {
		for _, c := range cases {
			name := fmt.Sprintf("%v/L%d/H%d/D%d/T%d/disk=%v", c.dt, c.layers, c.heads, c.dim, c.toks, disk)
			t.Run(name, func(t *testing.T) {
				fs, dir := vfs.FS(vfs.NewMem()), "/db"
				if disk {
					fs, dir = vfs.Default, t.TempDir()
				}
				db, err := Open(dir, &Options{FS: fs})
				if err != nil {
					t.Fatal(err)
				}
				spec := testSpec(c.dt, c.layers, c.heads, c.dim)
				p := randPacket(spec, "ns", c.toks, uint64(c.layers*1000+c.dim))
				id, err := db.Put(context.Background(), p)
				if err != nil {
					t.Fatal(err)
				}
				if want := format.ComputePacketID("ns", spec.Fingerprint(), "", p.TokenIDs); id != want {
					t.Fatalf("id %s, want %s", id.Short(), want.Short())
				}
				checkPacket(t, db, p, id)
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				db, err = Open(dir, &Options{FS: fs})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				checkPacket(t, db, p, id)
			})
		}
	}
}

func TestAdapterTokens(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 2, 8)
	p := randPacket(spec, "ns", 4+3+2, 9) // bytes for 9 rows
	p.TokenIDs = p.TokenIDs[:4]
	p.HeaderTokens, p.TrailerTokens, p.AdapterID = 3, 2, "adapter-v1"
	for _, a := range []string{"adapter-v1", "adapter-v2"} {
		if err := db.PutArtifact(spec.Fingerprint(), AdapterArtifact(a), []byte(a), ArtifactMeta{}); err != nil {
			t.Fatal(err)
		}
	}
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	checkPacket(t, db, p, id)
	v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if h := v.Header(); h.HeaderTokens != 3 || h.TrailerTokens != 2 || h.Tokens != 9 {
		t.Fatalf("header tokens %d+%d of %d", h.HeaderTokens, h.TrailerTokens, h.Tokens)
	}
	other := *p
	other.AdapterID = "adapter-v2"
	if id2, err := db.Put(context.Background(), &other); err != nil || id2 == id {
		t.Fatalf("another adapter must give another packet: %v, %v", id2.Short(), err)
	}
}

func TestPutIdempotent(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	p := randPacket(testSpec(format.DTypeBF16, 2, 2, 8), "ns", 10, 1)
	id1, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	before := db.Stats()
	id2, err := db.Put(context.Background(), p)
	if err != nil || id2 != id1 {
		t.Fatalf("second Put: %s, %v; want %s", id2.Short(), err, id1.Short())
	}
	after := db.Stats()
	if after.BytesWritten != before.BytesWritten || after.Packets != 1 || after.PutsDeduped != 1 || after.Puts != 1 {
		t.Fatalf("second Put wrote: before %+v after %+v", before, after)
	}
	checkPacket(t, db, p, id1)
}

func TestManyBlobFiles(t *testing.T) {
	fs := vfs.NewMem()
	const limit = 64 << 10
	db := openMem(t, fs, &Options{BlobFileSize: limit})
	spec := testSpec(format.DTypeF32, 2, 2, 16)
	var ps []*Packet
	var ids []format.PacketID
	for i := range 20 {
		toks := 20 + 30*(i%4) // 20..110 tokens: 10-28 KiB extents
		if i == 7 {
			toks = 600 // larger than a blob file alone
		}
		p := randPacket(spec, "ns", toks, uint64(i))
		id, err := db.Put(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		ps, ids = append(ps, p), append(ids, id)
	}
	files := db.BlobFiles()
	if len(files) < 5 {
		t.Fatalf("%d blob files, want several with a %d-byte limit", len(files), limit)
	}
	for i, f := range files {
		last := i == len(files)-1
		if f.Sealed == last {
			t.Errorf("file %d sealed=%v; only the last should be open", f.Num, f.Sealed)
		}
		if f.Size > limit && f.Extents != 1 {
			t.Errorf("file %d: %d bytes in %d extents exceeds the limit", f.Num, f.Size, f.Extents)
		}
		if f.LiveBytes+format.BlobHeaderSize != f.Size {
			t.Errorf("file %d: live %d + header != size %d", f.Num, f.LiveBytes, f.Size)
		}
	}
	for i := range ps {
		checkPacket(t, db, ps[i], ids[i])
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openMem(t, fs, &Options{BlobFileSize: limit})
	defer db.Close()
	for i := range ps {
		checkPacket(t, db, ps[i], ids[i])
	}
	// The reopened store keeps appending to its last file.
	last := files[len(files)-1]
	if _, err := db.Put(context.Background(), randPacket(spec, "ns", 5, 99)); err != nil {
		t.Fatal(err)
	}
	now := db.BlobFiles()
	if got := now[len(now)-1]; last.Size+format.Alignment <= limit && got.Num != last.Num {
		t.Fatalf("after reopen the put went to file %d, want %d", got.Num, last.Num)
	}
}

// TestExtentOnDisk reads a blob file raw, as a checker without the catalog
// would: the blob header names the file, and each extent's trailer names its
// packet and carries the CRC of its payload, padding included.
func TestExtentOnDisk(t *testing.T) {
	mem := vfs.NewMem()
	db := openMem(t, mem, nil)
	defer db.Close()
	for _, dim := range []int{8, 3} { // unpadded and padded chunks
		spec := testSpec(format.DTypeF32, 3, 2, dim)
		id, err := db.Put(context.Background(), randPacket(spec, "ns", 7, uint64(dim)))
		if err != nil {
			t.Fatal(err)
		}
		v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id)
		if err != nil {
			t.Fatal(err)
		}
		h := v.Header()
		v.Release()
		data, err := mem.UnsafeGetFileDataBuffer("/db/blobs/" + bloblog.FileName(h.BlobFile))
		if err != nil {
			t.Fatal(err)
		}
		if num, err := format.DecodeBlobHeader(data[:format.BlobHeaderSize]); err != nil || num != h.BlobFile {
			t.Fatalf("blob header: %d, %v", num, err)
		}
		end := h.ExtentOffset + h.ExtentLength
		tr, err := format.DecodeTrailer(data[end-format.TrailerSize : end])
		if err != nil {
			t.Fatal(err)
		}
		if tr.Packet != id || tr.Offset != h.ExtentOffset {
			t.Fatalf("trailer %+v does not describe packet %s at %d", tr, id.Short(), h.ExtentOffset)
		}
		payload := data[h.ExtentOffset : h.ExtentOffset+tr.PayloadLen]
		if got := format.CRC(payload); got != tr.PayloadCRC {
			t.Fatalf("payload crc %08x, trailer says %08x", got, tr.PayloadCRC)
		}
		last := h.Chunks[len(h.Chunks)-1]
		if tr.PayloadLen != last.Offset+last.Length-h.ExtentOffset {
			t.Fatalf("payload length %d does not end at the last chunk", tr.PayloadLen)
		}
		for _, b := range data[last.Offset+last.Length : end-format.TrailerSize] {
			if b != 0 {
				t.Fatal("padding before the trailer is not zero")
			}
		}
	}
}

func TestStatsCountSyncs(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 1, 8)
	var ids []format.PacketID
	for i := range 3 {
		id, err := db.Put(context.Background(), randPacket(spec, "ns", 4, uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), ids[0]); err != nil {
		t.Fatal(err)
	}
	s := db.Stats()
	if s.Packets != 2 || s.BytesWritten != 4*format.Alignment /* three packets, one tombstone */ || s.LiveBytes != 2*format.Alignment {
		t.Fatalf("packet counts %+v", s)
	}
	if err := db.Close(); err != nil { // waits for the catalog's background sync
		t.Fatal(err)
	}
	s = db.Stats()
	// One fdatasync per Put and one per Delete (its tombstone extent); their
	// catalog batches wait for no sync, and the background syncs that follow
	// (one at least, one per batch at most) are counted as catalog syncs.
	if s.BlobSyncs != 4 || s.CatalogUnsynced != 4 || s.CatalogSyncs < 1 || s.CatalogSyncs > 4 || s.BlobSyncTime <= 0 || s.CatalogSyncTime <= 0 {
		t.Fatalf("sync counts %+v", s)
	}
}

// TestPutDurableBehindBlobLog crashes right after Puts and a Delete were
// acknowledged, before the catalog's WAL was synced behind their batches
// (the clone is taken as the background sync starts): the catalog on
// disk lacks them, and Open applies them again from the blob log's synced
// put records and tombstone, so nothing acknowledged is lost and the
// deleted packet stays gone. A read-only open of the same state serves it
// too, the records applied to the catalog in memory only: it writes no
// byte to the store's directory.
func TestPutDurableBehindBlobLog(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var armed atomic.Bool
	var clone atomic.Pointer[vfs.MemFS]
	hook := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) && strings.HasSuffix(op.Path, ".log") && clone.Load() == nil {
			clone.Store(mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
		}
		return nil
	})
	db, err := Open("/db", &Options{FS: errorfs.Wrap(mem, hook), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec(format.DTypeF16, 2, 1, 8)
	ps := []*Packet{randPacket(spec, "ns", 20, 1), randPacket(spec, "ns", 30, 2), randPacket(spec, "ns", 40, 3)}
	var ids []format.PacketID
	for _, p := range ps {
		id, err := db.Put(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// A fresh Open whose batches the clone will lack: the clone is taken
	// at the first WAL sync after them, the background one.
	db, err = Open("/db", &Options{FS: errorfs.Wrap(mem, hook), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	p4 := randPacket(spec, "ns", 50, 4)
	db.catSync.Stop() // no background sync until the clone is armed: the batches stay unsynced
	id4, err := db.Put(context.Background(), p4)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), ids[0]); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if err := db.cat.SyncWAL(); err != nil { // the hook clones before this sync
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	crashed := clone.Load()
	if crashed == nil {
		t.Fatal("no crash clone was taken at the catalog's WAL sync")
	}
	// A read-only open serves the reconciled state from memory and writes
	// nothing.
	before := treeBytes(t, crashed, "/db")
	ro, err := Open("/db", &Options{FS: crashed, ReadOnly: true, Logger: quiet})
	if err != nil {
		t.Fatalf("read-only open of a catalog behind the blob log: %v", err)
	}
	if s := ro.Stats(); !s.ReconciledInMemory || s.Reconciled.Inserted != 1 || s.Reconciled.Deleted != 1 {
		t.Fatalf("read-only open: in memory %v, reconciled %+v; want the lost Put and Delete applied in memory", s.ReconciledInMemory, s.Reconciled)
	}
	checkPacket(t, ro, p4, id4)
	if _, err := ro.Get(context.Background(), "ns", spec.Fingerprint(), ids[0]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read-only Get of the packet deleted before the crash: %v, want ErrNotFound", err)
	}
	checkAllHeaders(t, ro, "read-only after the crash")
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if after := treeBytes(t, crashed, "/db"); !maps.Equal(after, before) {
		t.Fatal("a read-only open wrote to the store's directory")
	}
	db, err = Open("/db", &Options{FS: crashed, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if r := db.Stats().Reconciled; r.Inserted != 1 || r.Deleted != 1 {
		t.Fatalf("reconciled %+v, want the lost Put inserted and the lost Delete applied", r)
	}
	checkPacket(t, db, p4, id4)
	for i, p := range ps[1:] {
		checkPacket(t, db, p, ids[i+1])
	}
	if _, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of the packet deleted before the crash: %v, want ErrNotFound", err)
	}
	checkAllHeaders(t, db, "after the crash")
	// Once a read-write Open has applied them on disk, a read-only open
	// has nothing left to apply.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err = Open("/db", &Options{FS: crashed, ReadOnly: true, Logger: quiet})
	if err != nil {
		t.Fatalf("read-only open after the read-write one reconciled: %v", err)
	}
	defer ro.Close()
	if s := ro.Stats(); s.ReconciledInMemory || s.Reconciled.Changed() {
		t.Fatalf("read-only open after the read-write one: in memory %v, reconciled %+v", s.ReconciledInMemory, s.Reconciled)
	}
	checkPacket(t, ro, p4, id4)
}

// treeBytes returns every file below dir on fs and its bytes.
func treeBytes(t *testing.T, fs *vfs.MemFS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		p := fs.PathJoin(dir, n)
		st, err := fs.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.IsDir() {
			maps.Copy(out, treeBytes(t, fs, p))
			continue
		}
		out[p] = string(mustData(t, fs, p))
	}
	return out
}
