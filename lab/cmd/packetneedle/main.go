// Command packetneedle measures KV Packet at long context on gocode-2k (a
// 2,048-token byte-level Go model): multi-document needles (lab/quality's
// RunMultiDoc), and prints the table of docs/quality.md's "Multi-document
// needles (gocode-2k)":
//
//	go run ./lab/cmd/packetneedle                    # the full run: 200 requests
//	go run ./lab/cmd/packetneedle -requests 30       # a reduced run
//
// A request is BOS, -docs-min to -docs-max documents of -doc-min to
// -doc-max bytes (whole lines of held-out Go: the _test.go files of the go
// command's GOROOT/src), one carrying `const NAME = "VALUE"`, and the
// recall line `\treturn NAME // "`, the value teacher-forced after it.
// Methods: full recompute, plain packets, CacheBlend (-blend of the
// document tokens recomputed), the adapters given with -adapter
// NAME=FILE (safetensors, as kvstore adapter export writes them), and on
// plain and adapted packets int8, int4, TOVA (by each document's own
// prefill; not on a visible adapter's packets, whose rows differ) and
// random pruning at -keeps; with
// -controls, the untrained one-row headers (BOS dropped or kept, newline
// dropped) and the reference's untrained N_h = N_t = 8. Under the table,
// the share of the packets-to-full gap each method closes. -sinks prints
// instead the attention mass the question's and value's queries put on
// the BOS row, the documents' first rows, the needle's value and the
// visible adapter rows, per layer (quality.MultiDocSinks). A progress
// line per request goes to stderr; -workers measures that many requests
// at once (the table does not depend on it).
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/quality"
)

type adapters []quality.MultiDocAdapter

func (a *adapters) String() string { return fmt.Sprint(len(*a), " adapters") }

func (a *adapters) Set(s string) error {
	name, file, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want NAME=FILE, got %q", s)
	}
	ad, err := adapter.ReadFile(file)
	if err != nil {
		return err
	}
	*a = append(*a, quality.MultiDocAdapter{Name: name, Adapter: ad})
	return nil
}

func main() {
	var o options
	flag.IntVar(&o.requests, "requests", 200, "requests (the needle's document spread evenly over the ranks)")
	flag.IntVar(&o.spec.DocsMin, "docs-min", 4, "fewest documents per request")
	flag.IntVar(&o.spec.DocsMax, "docs-max", 8, "most documents per request")
	flag.IntVar(&o.spec.DocMin, "doc-min", 150, "fewest bytes per document")
	flag.IntVar(&o.spec.DocMax, "doc-max", 400, "most bytes per document (fewer where the request would pass 2,048 tokens)")
	flag.StringVar(&o.keeps, "keeps", "0.5,0.25,0.1", "kept fractions of TOVA and random pruning")
	flag.Float64Var(&o.blend, "blend", quality.DefaultBlendRatio, "CacheBlend's recomputed share of document tokens")
	flag.BoolVar(&o.compress, "compress", true, "measure int8, int4 and pruning")
	flag.Var(&o.adapters, "adapter", "NAME=FILE: an adapter (safetensors) to measure; repeatable")
	flag.Uint64Var(&o.spec.Seed, "seed", 1, "seed of the requests")
	flag.IntVar(&o.workers, "workers", 1, "requests measured at once (the table does not depend on it)")
	flag.BoolVar(&o.controls, "controls", false, "also measure the untrained one-row BOS header: each document prefilled after a BOS whose row is dropped from the packet (\"bos hidden\", what a hidden header initialised from BOS starts as) or kept (\"bos visible\"), the same after a newline (\"newline hidden\"), and the reference's untrained N_h = N_t = 8 adapter (rows from N(mean, std) of the embeddings, seed -seed)")
	flag.BoolVar(&o.sinks, "sinks", false, "print instead the attention mass the question's and value's queries put on the BOS row, the documents' first rows, the needle's value and the visible adapter rows, per layer, for the full recompute, plain packets, the two BOS controls and the adapters (-adapter, and with -controls the reference's untrained h8t8)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "packetneedle:", err)
		os.Exit(1)
	}
}

type options struct {
	requests int
	spec     quality.MultiDocSpec
	keeps    string
	blend    float64
	compress bool
	adapters adapters
	controls bool
	sinks    bool
	workers  int
}

func run(o options) error {
	keeps, err := quality.ParseFloats(o.keeps)
	if err != nil {
		return err
	}
	m, _, err := quality.LoadGoCode2k()
	if err != nil {
		return err
	}
	files, root, err := quality.HeldOutGoSrc(2 * o.spec.DocMax)
	if err != nil {
		return err
	}
	rand.New(rand.NewPCG(o.spec.Seed, 0x66696c65)).Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
	o.spec.Requests, o.spec.Limit = o.requests, m.SeqLen
	reqs, err := quality.MultiDocRequests(files, o.spec)
	if err != nil {
		return err
	}
	tokens := 0
	for _, r := range reqs {
		tokens += r.Len()
	}
	fmt.Printf("gocode-2k, %d requests of %d-%d documents of %d-%d bytes from held-out _test.go files of %s (%d files, seed %d); %d tokens per request on average\n\n",
		len(reqs), o.spec.DocsMin, o.spec.DocsMax, o.spec.DocMin, o.spec.DocMax, root, len(files), o.spec.Seed, tokens/len(reqs))
	if o.controls {
		ref, err := adapter.Init(m, 8, 8, o.spec.Seed)
		if err != nil {
			return err
		}
		newline, err := adapter.InitToken(m, 1, 0, '\n')
		if err != nil {
			return err
		}
		o.adapters = append(o.adapters, quality.MultiDocAdapter{Name: "reference init h8t8 (untrained)", Adapter: ref},
			quality.MultiDocAdapter{Name: "newline hidden (untrained)", Adapter: newline})
		if !o.sinks { // -sinks measures the BOS controls always
			hidden, err := adapter.InitToken(m, 1, 0, quality.GoBOS)
			if err != nil {
				return err
			}
			visible := *hidden
			visible.HideHeader = false
			o.adapters = append(o.adapters, quality.MultiDocAdapter{Name: "bos hidden (untrained)", Adapter: hidden},
				quality.MultiDocAdapter{Name: "bos visible (untrained)", Adapter: &visible})
		}
	}
	if o.sinks {
		return printSinks(m, reqs, o.adapters)
	}
	rows, err := quality.RunMultiDoc(quality.MultiDocConfig{Model: m, Requests: reqs, Keeps: keeps, BlendRatio: o.blend,
		Adapters: o.adapters, Compress: o.compress, Seed: o.spec.Seed, Workers: o.workers,
		Progress: func(i int, r *quality.MultiDocRequest, elapsed time.Duration) {
			fmt.Fprintf(os.Stderr, "request %d/%d (%d documents, needle in %d, %d tokens) %v\n", i+1, len(reqs), len(r.Docs), r.Needle+1, r.Len(), elapsed.Round(time.Second))
		}})
	if err != nil {
		return err
	}
	fmt.Println("| method | log-prob/byte | log-prob median / worst | top-1/byte | top-1 median / worst | exact | top-1 needle first / inner / last | KL mean | KL median | KL worst |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		top, _ := r.RankTop1()
		fmt.Printf("| %s | %.2f | %.2f / %.2f | %.3f | %.2f / %.2f | %d/%d | %.2f / %.2f / %.2f | %.3f | %.3f | %.3f |\n", r.Method, r.LogProb(), r.MedianLogProb(), r.WorstLogProb(), r.Top1(),
			r.MedianTop1(), r.WorstTop1(), r.Exact(), len(r.Scores), top[0], top[1], top[2], r.KL(), r.MedianKL(), r.WorstKL())
	}
	printRecovered(rows)
	_, n := rows[0].RankTop1()
	fmt.Printf("\nneedle in the first / an inner / the last document: %d / %d / %d requests\n", n[0], n[1], n[2])
	return nil
}

// printSinks prints quality.MultiDocSinks over reqs, a row per layout and
// layer.
func printSinks(m *llama.Model, reqs []*quality.MultiDocRequest, adapters []quality.MultiDocAdapter) error {
	rows, err := quality.MultiDocSinks(m, reqs, adapters)
	if err != nil {
		return err
	}
	fmt.Println("Attention mass of the question's and value's queries (mean over requests, heads, queries):")
	fmt.Println()
	fmt.Println("| layout | layer | BOS row | documents' first rows (sum) | documents' second rows (sum) | all document rows | needle's value rows | visible adapter rows (sum) | question and value |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		for l := range r.BOS {
			fmt.Printf("| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", r.Method, l, r.BOS[l], r.Starts[l], r.Second[l], r.Docs[l], r.Value[l], r.Adapter[l], 1-r.BOS[l]-r.Docs[l])
		}
	}
	return nil
}

// printRecovered prints, for every method after the full recompute and
// the plain packets (rows[0] and rows[1]), the share of the gap between
// the packets and the full recompute it closes: in value log-prob (mean
// over requests: (method - packets) / (full - packets); per request: the
// median over requests of |method - full| against the packets' median
// |packets - full|) and in KL (the full recompute's is 0: (packets -
// method) / packets, of the mean and of the median).
func printRecovered(rows []quality.MultiDocRow) {
	if len(rows) < 3 {
		return
	}
	full, plain := &rows[0], &rows[1]
	share := func(m, p, f float64) string {
		if f == p {
			return "-"
		}
		return fmt.Sprintf("%.0f%%", 100*(m-p)/(f-p))
	}
	dev := func(r *quality.MultiDocRow) float64 { // median |log-prob - full's| over requests
		d := make([]float64, len(r.Scores))
		for i, s := range r.Scores {
			d[i] = math.Abs(s.LogProb - full.Scores[i].LogProb)
		}
		slices.Sort(d)
		n := len(d)
		return (d[(n-1)/2] + d[n/2]) / 2
	}
	fmt.Println()
	fmt.Println("| method | median abs(log-prob - full's) | gap closed: log-prob mean | log-prob per request (median abs) | KL mean | KL median |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	fmt.Printf("| %s | %.3f | | | | |\n", plain.Method, dev(plain))
	for _, r := range rows[2:] {
		fmt.Printf("| %s | %.3f | %s | %s | %s | %s |\n", r.Method, dev(&r), share(r.LogProb(), plain.LogProb(), full.LogProb()),
			share(dev(&r), dev(plain), 0), share(r.KL(), plain.KL(), full.KL()), share(r.MedianKL(), plain.MedianKL(), full.MedianKL()))
	}
	fmt.Println()
	fmt.Println("KL on the positions that predict the question's tokens and on those that predict the value's bytes (and the byte after), mean / median over requests, and the share of the packets' median each method closes:")
	fmt.Println()
	fmt.Println("| method | question KL mean / median | value KL mean / median | gap closed: question median | value median |")
	fmt.Println("|---|---|---|---:|---:|")
	fmt.Printf("| %s | %.3f / %.3f | %.3f / %.3f | | |\n", plain.Method, plain.QuestionKL(), plain.MedianQuestionKL(), plain.ValueKL(), plain.MedianValueKL())
	for _, r := range rows[2:] {
		fmt.Printf("| %s | %.3f / %.3f | %.3f / %.3f | %s | %s |\n", r.Method, r.QuestionKL(), r.MedianQuestionKL(), r.ValueKL(), r.MedianValueKL(),
			share(r.MedianQuestionKL(), plain.MedianQuestionKL(), 0), share(r.MedianValueKL(), plain.MedianValueKL(), 0))
	}
}
