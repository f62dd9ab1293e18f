package store

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// BenchmarkCompact rewrites 32 MiB blob files that are half dead (1 MiB
// packets, every other one deleted) on the OS file system; bytes are the
// live bytes copied.
func BenchmarkCompact(b *testing.B) {
	spec := testSpec(format.DTypeBF16, 8, 8, 128)
	for range b.N {
		b.StopTimer()
		db, err := Open(b.TempDir(), &Options{FS: vfs.Default, BlobFileSize: 32 << 20, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		for i := range 64 {
			p := randPacket(spec, "ns", 32, uint64(i)) // 8 x 2 x 8 x 32 x 128 x 2 B = 1 MiB
			id, err := db.Put(context.Background(), p)
			if err != nil {
				b.Fatal(err)
			}
			if i%2 == 1 {
				if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), id); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StartTimer()
		rep, err := db.Compact(context.Background(), CompactOptions{LiveRatio: 0.6})
		if err != nil || rep.Extents == 0 {
			b.Fatalf("%+v %v", rep, err)
		}
		b.SetBytes(int64(rep.BytesCopied))
		b.StopTimer()
		db.Close()
	}
}
