//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/kvstore/kvstore/llamacpp"
	"github.com/kvstore/kvstore/store"
)

// benchTokens returns n byte tokens of held-out Go source (the standard
// library's _test.go files, which gocode-hd64 never saw), BOS first.
func benchTokens(b *testing.B, n int) []int32 {
	b.Helper()
	out := []int32{1}
	for _, f := range []string{"bytes/buffer_test.go", "strings/strings_test.go", "fmt/fmt_test.go"} {
		src, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", f))
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range src {
			if len(out) == n {
				return out
			}
			out = append(out, int32(c))
		}
	}
	b.Fatalf("not %d bytes of Go source", n)
	return nil
}

// restorePairs is how many times each iteration of BenchmarkRestore
// reopens the store and times the pairs: the prefill that ends an
// iteration costs up to seconds, a reopen and its pairs milliseconds, and
// on a shared machine the medians of 9 pairs moved by up to 2x between
// runs.
const restorePairs = 5

// BenchmarkRestore restores a sequence of n tokens of gocode-hd64 into a
// llama.cpp context, paired in each iteration: kvstore's default restore
// (Load without options: Assemble straight into the state, on every core,
// then llama_state_seq_set_data) against llama.cpp's own
// llama_state_seq_load_file of the file its llama_state_seq_save_file
// wrote, back to back, alternating which goes first, restorePairs times
// an iteration (each time the store reopened), the medians over them all
// reported. kvstore-ms and llamafile-ms pair the first restore after the
// store is reopened (every chunk read from the file and its CRC32C
// verified again);
// kvsecond-ms is the next restore, alone (the first through the blob
// file's fresh mapping, which faults its pages in); kvwarm-ms and
// llamafile-warm-ms pair the one after. The 1worker metrics are
// Load with one worker, warm and just reopened; prefill-ms decodes the
// tokens again. The context has 4,160 cells although gocode-hd64 was
// trained on 512: RoPE extrapolates, and this measures speed only. One
// thread, F16 cache (llama.cpp's default) and F32. Run with
//
//	go test ./llamacpp -run '^$' -bench BenchmarkRestore -benchtime 9x
func BenchmarkRestore(b *testing.B) {
	m := model(b, "gocode-hd64.bin")
	for _, cache := range []llamacpp.CacheType{llamacpp.CacheF16, llamacpp.CacheF32} {
		for _, n := range []int{256, 1024, 4096} {
			b.Run(fmt.Sprintf("%s/tokens=%d", cache.DType(), n), func(b *testing.B) { benchRestore(b, m, cache, n) })
		}
	}
}

func benchRestore(b *testing.B, m *llamacpp.Model, cache llamacpp.CacheType, n int) {
	o := llamacpp.ContextOptions{Ctx: 4096 + 64, Batch: 512, Threads: 1, Cache: cache}
	toks := benchTokens(b, n)
	dir := b.TempDir()
	db, err := store.Open(filepath.Join(dir, "store"), nil)
	if err != nil {
		b.Fatal(err)
	}
	src := newContext(b, m, o)
	prefill := func(c *llamacpp.Context) {
		c.Remove(0, -1, -1)
		for i := 0; i < n; i += o.Batch {
			if err := c.Decode(0, i, toks[i:min(i+o.Batch, n)]); err != nil {
				b.Fatal(err)
			}
		}
	}
	prefill(src)
	id, err := llamacpp.Save(context.Background(), db, "bench", src, 0, u32s(toks))
	if err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(dir, "seq.state")
	fileBytes, err := src.SaveFile(file, 0, toks)
	if err != nil {
		b.Fatal(err)
	}
	db.Close()
	dst := newContext(b, m, o)
	b.SetBytes(int64(src.StateSize(0)))
	b.ReportAllocs()
	kvLoad := func(db *store.DB, o *store.AssembleOptions) time.Duration {
		t0 := time.Now()
		if _, err := llamacpp.Load(context.Background(), db, "bench", dst, 0, []store.AssembleItem{{ID: id}}, o); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	fileLoad := func() time.Duration {
		t0 := time.Now()
		if _, err := dst.LoadFile(file, 0, n); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	one := &store.AssembleOptions{Workers: 1}
	reopen := func() *store.DB {
		b.StopTimer()
		db, err := store.Open(filepath.Join(dir, "store"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		return db
	}
	// pair times the default Load (no options) and load_file back to
	// back, alternating which goes first.
	pair := func(i int, db *store.DB, kv, lf *[]time.Duration) {
		if i%2 == 0 {
			*kv = append(*kv, kvLoad(db, nil))
			*lf = append(*lf, fileLoad())
		} else {
			*lf = append(*lf, fileLoad())
			*kv = append(*kv, kvLoad(db, nil))
		}
	}
	var cold, second, warm, lfCold, lfWarm, cold1, warm1, pf []time.Duration
	b.ResetTimer()
	for i := range b.N {
		var db *store.DB
		for j := range restorePairs {
			if db != nil {
				b.StopTimer()
				db.Close()
			}
			db = reopen()
			k := i*restorePairs + j
			pair(k, db, &cold, &lfCold)
			second = append(second, kvLoad(db, nil))
			pair(k+1, db, &warm, &lfWarm)
		}
		warm1 = append(warm1, kvLoad(db, one))
		b.StopTimer()
		db.Close()
		db = reopen()
		cold1 = append(cold1, kvLoad(db, one))
		t0 := time.Now()
		prefill(dst)
		pf = append(pf, time.Since(t0))
		b.StopTimer()
		db.Close()
		b.StartTimer()
	}
	// Medians: this machine is shared, and a mean would carry its stalls.
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1e3
	}
	b.ReportMetric(med(cold), "kvstore-ms")
	b.ReportMetric(med(lfCold), "llamafile-ms")
	b.ReportMetric(med(second), "kvsecond-ms")
	b.ReportMetric(med(warm), "kvwarm-ms")
	b.ReportMetric(med(lfWarm), "llamafile-warm-ms")
	b.ReportMetric(med(cold1), "kvstore-1worker-ms")
	b.ReportMetric(med(warm1), "kvwarm-1worker-ms")
	b.ReportMetric(med(pf), "prefill-ms")
	b.ReportMetric(float64(fileBytes), "file-bytes")
}
