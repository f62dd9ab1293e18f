// Command spansize measures the room span memories take on gocode-2k (a
// 2,048-token byte-level Go model) against the raw bf16 K and V they
// stand for, and prints docs/quality.md's "Span memory size" figures:
//
//	go run ./lab/cmd/spansize -contexts 24
//
// Each context is the first -window bytes (a GoBOS, then the file's
// bytes) of a held-out _test.go file of the go command's GOROOT/src, in an
// order shuffled by -seed. Its KV cache is prefilled at position 0 and its
// span memory built by store.BuildSpanMemory for the model's spec in
// -dtype, with the store's defaults (the size rule) and with every span
// the segmentation factors kept factored (SpanOptions.FactorAll), and
// measured by SpanMemory.Size: stored bytes (extent and catalog records)
// over the raw bf16 rows, per context, then median and largest (and over
// the raw rows in -dtype, what the store keeps its memories within, when
// that is not a 16-bit dtype).
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/quality"
	"github.com/kvstore/kvstore/store"
)

func main() {
	contexts := flag.Int("contexts", 24, "held-out contexts")
	window := flag.Int("window", 2048, "context tokens (gocode-2k's seq_len: 2048)")
	seed := flag.Uint64("seed", 1, "seed of the files' order")
	dtype := flag.String("dtype", "bf16", "the model spec's dtype: bf16, f16 or f32 (the resident rows')")
	flag.Parse()
	if err := run(*contexts, *window, *seed, *dtype); err != nil {
		fmt.Fprintln(os.Stderr, "spansize:", err)
		os.Exit(1)
	}
}

func run(contexts, window int, seed uint64, dtype string) error {
	dt, err := format.ParseDType(dtype)
	if err != nil {
		return err
	}
	m, _, err := quality.LoadGoCode2k()
	if err != nil {
		return err
	}
	all, root, err := quality.HeldOutGoSrc(window)
	if err != nil {
		return err
	}
	if len(all) < contexts {
		return fmt.Errorf("%d held-out files of %d bytes under %s, want %d", len(all), window, root, contexts)
	}
	rand.New(rand.NewPCG(seed, 0x66696c65)).Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	fmt.Printf("gocode-2k, %d contexts of %d tokens, held-out _test.go files of %s (seed %d), %v spec\n\n", contexts, window, root, seed, dt)
	fmt.Println("| file | spans (factored) | resident rows | stored / raw bf16 | records / raw bf16 | every span factored: spans, stored / raw bf16 |")
	fmt.Println("|---|---|---|---|---|---|")
	start := time.Now()
	var rule, every []quality.SpanSizeRow
	for i, f := range all[:contexts] {
		toks, err := quality.GoContext(f, window)
		if err != nil {
			return err
		}
		rows, err := quality.SpanSize(m, toks, dt, nil, &store.SpanOptions{FactorAll: true})
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		r, a := rows[0], rows[1]
		rule, every = append(rule, r), append(every, a)
		name, _ := filepath.Rel(root, f)
		if r.Refused {
			fmt.Printf("| %s | refused (ErrSpanNotSmaller) | | | | %d, %.3f |\n", name, a.Spans, a.Ratio())
		} else {
			fmt.Printf("| %s | %d (%d) | %d | %.3f | %.4f | %d, %.3f |\n", name, r.Spans, r.Factored, r.Resident, r.Ratio(),
				float64(r.Size.Records)/float64(r.Size.RawBF16), a.Spans, a.Ratio())
		}
		fmt.Fprintf(os.Stderr, "%d/%d %v\n", i+1, contexts, time.Since(start).Round(time.Second))
	}
	refused := 0
	for _, r := range rule {
		if r.Refused {
			refused++
		}
	}
	med, worst := quality.MedianWorst(rule)
	amed, aworst := quality.MedianWorst(every)
	fmt.Printf("\nstored / raw bf16, store defaults: median %.3f, largest %.3f (%d of %d built, %d refused)\n", med, worst,
		contexts-refused, contexts, refused)
	fmt.Printf("stored / raw bf16, every span factored (FactorAll): median %.3f, largest %.3f\n", amed, aworst)
	if dt.Size() != 2 {
		// Raw is the rows in the spec's dtype, a fixed multiple of RawBF16.
		f := 2 / float64(dt.Size())
		fmt.Printf("stored / raw %v: store defaults median %.3f, largest %.3f; every span factored median %.3f, largest %.3f\n",
			dt, med*f, worst*f, amed*f, aworst*f)
	}
	return nil
}
