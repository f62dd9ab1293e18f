package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
)

// BenchmarkDeletePaired alternates, each iteration, a durable delete in a
// plain file store (unlink the packet's file, fsync the directory) and a
// kvstore Delete (tombstone extent written and fdatasynced, then the
// synced catalog batch), and reports both rates, their ratio, and what the
// Delete's two syncs took per call (blob-sync-us, catalog-sync-us).
func BenchmarkDeletePaired(b *testing.B) {
	spec := testSpec(format.DTypeBF16, 2, 1, 8)
	dir := b.TempDir()
	db, err := Open(filepath.Join(dir, "store"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	plainDir := filepath.Join(dir, "plain")
	if err := os.Mkdir(plainDir, 0o755); err != nil {
		b.Fatal(err)
	}
	const batch = 64
	var ids []format.PacketID
	var plain, ours time.Duration
	var blobSync, catSync time.Duration
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if len(ids) == 0 { // refill, outside the timed part
			b.StopTimer()
			for j := range batch {
				id, err := db.Put(context.Background(), randPacket(spec, "ns", 4, uint64(i*batch+j)))
				if err != nil {
					b.Fatal(err)
				}
				ids = append(ids, id)
				if err := os.WriteFile(filepath.Join(plainDir, fmt.Sprint(j)), make([]byte, format.Alignment), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
		id := ids[len(ids)-1]
		ids = ids[:len(ids)-1]
		start := time.Now()
		if err := os.Remove(filepath.Join(plainDir, fmt.Sprint(len(ids)))); err != nil {
			b.Fatal(err)
		}
		d, err := os.Open(plainDir)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
		d.Close()
		mid := time.Now()
		s0 := db.Stats()
		if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), id); err != nil {
			b.Fatal(err)
		}
		end := time.Now()
		s1 := db.Stats()
		plain, ours = plain+mid.Sub(start), ours+end.Sub(mid)
		blobSync += s1.BlobSyncTime - s0.BlobSyncTime
		catSync += s1.CatalogSyncTime - s0.CatalogSyncTime
		i++
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(float64(b.N)/plain.Seconds(), "plain-deletes/s")
	b.ReportMetric(float64(b.N)/ours.Seconds(), "kvstore-deletes/s")
	b.ReportMetric(plain.Seconds()/ours.Seconds(), "x-plain")
	b.ReportMetric(per(blobSync), "blob-sync-us")
	b.ReportMetric(per(catSync), "catalog-sync-us")
}
