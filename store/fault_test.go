package store

import (
	"context"
	"errors"
	"github.com/kvstore/kvstore/store/internal/view"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// TestTruncatedUnderView truncates a blob file on the OS's file system
// (mapped, unlike the in-memory FS, which copies) under live views and a
// prepared assembly. Touching the lost pages raises SIGBUS; every store
// read of mapped bytes must turn it into an error (ErrCorruption: the file
// is shorter than the read), not a crash of the test binary.
func TestTruncatedUnderView(t *testing.T) {
	if !bloblog.MmapSupported {
		t.Skip("no mmap on this platform: reads copy and see a short file")
	}
	spec := testSpec(format.DTypeBF16, 2, 4, 64)
	dir := t.TempDir()
	db, err := Open(dir, &Options{Logger: quiet, BlobFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Two 512 KiB packets: the second seals file 1, so that Compact takes it.
	ids := putAll(t, db, []*Packet{floatPacket(spec, "ns", 256, 0, 0, 1), floatPacket(spec, "ns", 256, 0, 0, 2)})
	fp := spec.Fingerprint()
	views := make([]*View, 2)
	for i := range views {
		if views[i], err = db.Get(context.Background(), "ns", fp, ids[0]); err != nil {
			t.Fatal(err)
		}
		defer views[i].Release()
		if !view.Mapped(views[i].in) || views[i].Header().BlobFile != 1 {
			t.Fatalf("view of blob file %d, mapped %v: want file 1, mapped", views[i].Header().BlobFile, view.Mapped(views[i].in))
		}
	}
	a, err := db.PrepareAssemble(context.Background(), "ns", fp, []AssembleItem{{ids[0], 0}})
	if err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(dir, blobsDirName, bloblog.FileName(1))
	if err := os.Truncate(blob, format.BlobHeaderSize); err != nil {
		t.Fatal(err)
	}

	wantFault := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrCorruption) && !errors.Is(err, syscall.EIO) {
			t.Errorf("%s on a file truncated under its mapping: %v, want ErrCorruption or EIO", what, err)
		} else {
			t.Logf("%s: %v", what, err)
		}
	}
	rep, err := db.Verify(t.Context(), VerifyOptions{})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep.OK() {
		t.Error("Verify found nothing wrong with a truncated blob file")
	}
	wantFault("Assemble", a.Run(context.Background(), NewContiguousDest(spec, a.Tokens()), nil))
	_, err = views[0].Chunk(0)
	wantFault("Chunk", err)
	_, _, err = views[0].Layer(1)
	wantFault("Layer", err)
	_, err = views[1].CopyChunk(make([]byte, 1<<20), 2)
	wantFault("CopyChunk", err)
	crep, err := db.Compact(t.Context(), CompactOptions{Files: []uint32{1}, LiveRatio: 1})
	switch {
	case err != nil:
		wantFault("Compact", err)
	case len(crep.Skipped) != 1 || crep.Skipped[0].Num != 1 || len(crep.Rewritten) != 0:
		t.Errorf("Compact of the truncated file: %+v, want it skipped", crep)
	default:
		t.Logf("Compact skipped file 1: %s", crep.Skipped[0].Reason)
	}
}
