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

// BenchmarkRestore restores a sequence of n tokens of gocode-hd64 into a
// llama.cpp context three ways, paired in each iteration: kvstore (the
// store reopened first, so every chunk's CRC32C is verified again, then
// Load: Assemble straight into the state and llama_state_seq_set_data),
// llama.cpp's own llama_state_seq_load_file of the file its
// llama_state_seq_save_file wrote, and prefilling the tokens again. The
// context has 4,160 cells although gocode-hd64 was trained on 512: RoPE
// extrapolates, and this measures speed only. One thread, one worker, F16
// cache (llama.cpp's default) and F32; the two restores alternate which
// goes first. Run with
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
	var cold, coldPar, warm, par, lf, pf []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		db, err := store.Open(filepath.Join(dir, "store"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if i%2 == 0 { // alternate which goes first
			cold = append(cold, kvLoad(db, one))
			lf = append(lf, fileLoad())
		} else {
			lf = append(lf, fileLoad())
			cold = append(cold, kvLoad(db, one))
		}
		warm = append(warm, kvLoad(db, one))
		par = append(par, kvLoad(db, nil))
		b.StopTimer()
		db.Close()
		if db, err = store.Open(filepath.Join(dir, "store"), nil); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		coldPar = append(coldPar, kvLoad(db, nil))
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
	b.ReportMetric(med(coldPar), "kvstore-allcores-ms")
	b.ReportMetric(med(warm), "kvwarm-ms")
	b.ReportMetric(med(par), "kvwarm-allcores-ms")
	b.ReportMetric(med(lf), "llamafile-ms")
	b.ReportMetric(med(pf), "prefill-ms")
	b.ReportMetric(float64(fileBytes), "file-bytes")
}
