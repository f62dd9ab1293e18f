package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/assemble"
	"github.com/kvstore/kvstore/store/internal/view"
)

// BenchmarkRestorePhases times, one by one, the phases of Assemble of one
// packet into a transposed-V destination (what llamacpp.Load does), in
// gocode-hd64's shape (2 layers x 2 KV heads x 64, f16), just after Open
// (the store reopened, its first read of the packet: *-cold-us) and warm
// (the next two reads: *-warm-us), medians over the iterations, in µs:
// header (the catalog lookup and the header's decode and checks), file
// (pinning the blob file and making the view: its open and mapping when
// Open did not), model (the model spec), prepare (assemble.Prepare), run
// (the fill, reading and verifying each chunk the first time) and
// release. Open itself is not timed. Run it as
//
//	go test -run '^$' -bench BenchmarkRestorePhases -benchtime 40x ./store/
func BenchmarkRestorePhases(b *testing.B) {
	spec := testSpec(format.DTypeF16, 2, 2, 64)
	for _, n := range []int{256, 1024, 4096} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			db, err := Open(dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			id, err := db.Put(context.Background(), floatPacket(spec, "bench", n, 0, 0, 1))
			if err != nil {
				b.Fatal(err)
			}
			db.Close()
			dst := NewContiguousDest(spec, n)
			dst.Layout = LayoutTransposedV
			fp := spec.Fingerprint()
			names := []string{"header", "file", "model", "prepare", "run", "release"}
			cold := make([][]time.Duration, len(names))
			warm := make([][]time.Duration, len(names))
			once := func(db *DB, into [][]time.Duration) {
				t := time.Now()
				lap := func(i int) {
					now := time.Now()
					into[i] = append(into[i], now.Sub(t))
					t = now
				}
				h, err := db.header("bench", id)
				if err != nil {
					b.Fatal(err)
				}
				lap(0)
				f := db.file(h.BlobFile)
				v, err := view.New(h, f, db.viewOptions())
				if err != nil {
					b.Fatal(err)
				}
				lap(1)
				m, err := db.Model(fp)
				if err != nil {
					b.Fatal(err)
				}
				lap(2)
				a, err := assemble.Prepare(m, []assemble.Item{{Src: view.SourceOf(v)}})
				if err != nil {
					b.Fatal(err)
				}
				lap(3)
				if err := a.Run(context.Background(), toDest(dst), nil); err != nil {
					b.Fatal(err)
				}
				lap(4)
				v.Release()
				lap(5)
			}
			for range b.N {
				db, err := Open(dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				once(db, cold)
				once(db, warm)
				once(db, warm)
				db.Close()
			}
			med := func(d []time.Duration) float64 {
				slices.Sort(d)
				return float64(d[len(d)/2].Nanoseconds()) / 1e3
			}
			for i, nm := range names {
				b.ReportMetric(med(cold[i]), nm+"-cold-us")
				b.ReportMetric(med(warm[i]), nm+"-warm-us")
			}
		})
	}
}
