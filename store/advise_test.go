package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/view"
)

// TestViewAdvisesOnFirstVerify checks that a mapped view asks for its
// extent when it first verifies a chunk, and that views that copy, or do
// not verify, do not.
func TestViewAdvisesOnFirstVerify(t *testing.T) {
	for _, k := range storeKinds {
		for _, noCRC := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/checksums=%v", k.name, !noCRC), func(t *testing.T) {
				db, fs, dir := openKind(t, k.disk, k.noMmap)
				if noCRC {
					if err := db.Close(); err != nil {
						t.Fatal(err)
					}
					var err error
					if db, err = Open(dir, &Options{FS: fs, DisableMmap: k.noMmap, DisableChecksums: true, BlobFileSize: 128 << 10, Logger: quiet}); err != nil {
						t.Fatal(err)
					}
				}
				defer db.Close()
				spec := testSpec(format.DTypeBF16, 3, 2, 8)
				id, err := db.Put(context.Background(), randPacket(spec, "ns", 9, 4))
				if err != nil {
					t.Fatal(err)
				}
				v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id)
				if err != nil {
					t.Fatal(err)
				}
				defer v.Release()
				if view.Advised(v.in) {
					t.Fatal("advised before any chunk was read")
				}
				if _, _, err := v.Layer(0); err != nil {
					t.Fatal(err)
				}
				if got, want := view.Advised(v.in), k.mapped && !noCRC; got != want {
					t.Fatalf("advised = %v after the first read, want %v", got, want)
				}
			})
		}
	}
}
