// Command adapterquality measures KV Packet adapters (package adapter,
// trained by lab/train) on stories260K and gocode-hd64: KL(full
// recompute || packets) and top-1 agreement of the next token and over a
// short greedy continuation, on held-out requests disjoint from the
// training ones, for no adapter, trained adapters of N = N_h = N_t rows,
// and the question alone. It prints the markdown tables of
// docs/quality.md ("KV Packet adapters") on stdout and progress on stderr.
//
//	go run ./lab/cmd/adapterquality [-models stories,gocode] [-n 4,8,16] [-header-only 1,4] [-init stats|token]
//
// -init picks where training starts: stats, the reference's N(mean, std)
// rows, all kept in the packet; token, adapter.InitToken, a hidden
// BOS-embedding header (prefilled, not kept) and mean-row trailer rows.
// -no-train scores the initial adapters only.
//
// Training is logged every epoch; -eval-every K scores the held-out
// requests every K epochs too, -eval-train scores no adapter and each
// trained adapter on the training requests, -save writes the trained
// adapters, and -fit-heldout trains on the held-out requests themselves
// (a bound, not a result). -oracle adds rows that bound what a hidden
// header could do: each document prefilled after BOS and a context taken
// from the requests (the true text before it, its last k tokens, or
// another request's documents), those rows then dropped.
//
// Requests are BOS, 2-5 documents and a question (the training requests
// 2-3 documents, for time); every document is prefilled alone (after its
// header, before its trailer) and the BOS alone. stories260K's documents
// and questions are stretches of its own sampled stories (temperature 1,
// each cut after its first 4 tokens); gocode-hd64's are byte cuts of Go
// files under $(go env GOROOT)/src, training requests from non-test files
// (which the model was trained on) and held-out ones from _test.go files
// (which it never saw).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format/safetensors"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/train"
)

type config struct {
	models                 []string
	ns, headerOnly         []int
	trainN, heldN          int
	docLen, qLen, answer   int
	cont                   int
	epochs, batch, workers int
	lr                     float64
	seed                   uint64
	init                   string
	trailerTok             int
	noTrain                bool
	oracles                []oracle
	evalEvery              int
	save                   string
	evalTrain, fitHeldout  bool
}

func main() {
	var c config
	models := flag.String("models", "stories,gocode", "models to measure: stories, gocode")
	ns := flag.String("n", "4,8,16", "adapter sizes N = N_h = N_t (empty: none)")
	headerOnly := flag.String("header-only", "", "header-only adapter sizes N_h (N_t = 0) to add, e.g. 4")
	flag.IntVar(&c.trainN, "train", 128, "training requests")
	flag.IntVar(&c.heldN, "heldout", 48, "held-out requests")
	flag.IntVar(&c.docLen, "doc-len", 24, "tokens per document")
	flag.IntVar(&c.qLen, "question-len", 8, "tokens per question")
	flag.IntVar(&c.answer, "answer", 4, "greedy answer tokens the training loss covers")
	flag.IntVar(&c.cont, "cont", 8, "continuation positions scored (the next token included)")
	flag.IntVar(&c.epochs, "epochs", 4, "training epochs")
	flag.IntVar(&c.batch, "batch", 8, "examples per AdamW step")
	flag.IntVar(&c.workers, "workers", 1, "goroutines computing a batch")
	flag.Float64Var(&c.lr, "lr", 5e-4, "peak learning rate (linear decay to 0)")
	seed := flag.Uint64("seed", 1, "seed of the requests and of training")
	flag.StringVar(&c.init, "init", "stats", "adapter initialisation: stats (N(mean, std) of the embedding columns, the reference's); token (adapter.InitToken: header rows BOS's embedding and hidden from the question, trailer rows the mean embedding); bos, bos-mean, bos-tok (visible header rows BOS's embedding; trailer rows BOS's, the mean, or -trailer-token's)")
	flag.IntVar(&c.trailerTok, "trailer-token", 13, "with -init bos-tok: the token whose embedding the trailer rows start from")
	flag.BoolVar(&c.noTrain, "no-train", false, "evaluate the initial adapters only")
	oracles := flag.String("oracle", "", "oracle rows to add, comma-separated: all (each document prefilled after the true text before it, those rows dropped), k (after its last k tokens), other (after another request's documents)")
	flag.IntVar(&c.evalEvery, "eval-every", 0, "evaluate the held-out requests every this many epochs while training (0: at the end only); the epoch loss is logged every epoch")
	flag.StringVar(&c.save, "save", "", "directory to write each trained adapter to (safetensors, f32)")
	flag.BoolVar(&c.evalTrain, "eval-train", false, "also score no adapter and each trained adapter on the training requests")
	flag.BoolVar(&c.fitHeldout, "fit-heldout", false, "train on the held-out requests themselves (a bound: the best a shared adapter does on that set)")
	flag.Parse()
	for _, s := range strings.Split(*oracles, ",") {
		if s == "" {
			continue
		}
		o, err := oracleOf(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "adapterquality:", err)
			os.Exit(2)
		}
		c.oracles = append(c.oracles, o)
	}
	c.seed = *seed
	c.models = strings.Split(*models, ",")
	for _, s := range strings.Split(*ns, ",") {
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "adapterquality: bad -n", s)
			os.Exit(2)
		}
		c.ns = append(c.ns, n)
	}
	for _, s := range strings.Split(*headerOnly, ",") {
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "adapterquality: bad -header-only", s)
			os.Exit(2)
		}
		c.headerOnly = append(c.headerOnly, n)
	}
	if err := run(os.Stdout, os.Stderr, c); err != nil {
		fmt.Fprintln(os.Stderr, "adapterquality:", err)
		os.Exit(1)
	}
}

func run(w, log io.Writer, c config) error {
	fmt.Fprintf(w, "Settings: %d training requests (2-3 documents), %d held-out requests (2-5 documents), documents of %d tokens, questions of %d; "+
		"training loss over %d greedy answer tokens, AdamW lr %g (linear decay to 0, no weight decay), batch %d, %d epochs, seed %d; "+
		"continuation: %d positions (the next token and %d teacher-forced greedy tokens).\n\n",
		c.trainN, c.heldN, c.docLen, c.qLen, c.answer, c.lr, c.batch, c.epochs, c.seed, c.cont, c.cont-1)
	for _, name := range c.models {
		if err := measure(w, log, c, name); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func measure(w, log io.Writer, c config, name string) error {
	file := map[string]string{"stories": "stories260K.bin", "gocode": "gocode-hd64.bin"}[name]
	if file == "" {
		return fmt.Errorf("unknown model (stories or gocode)")
	}
	p, ok := testenv.ModelPath(file)
	if !ok {
		return fmt.Errorf("no %s at %s", file, p)
	}
	m, err := llama.Load(p)
	if err != nil {
		return err
	}
	var trainSrc, heldSrc train.Source
	what := "its own sampled stories, training and held-out drawn from disjoint random streams"
	if name == "stories" {
		trainSrc, heldSrc = train.Sampled{Model: m, Skip: 4}, train.Sampled{Model: m, Skip: 4}
	} else {
		root := filepath.Join(runtime.GOROOT(), "src")
		isTest := func(p string) bool { return strings.HasSuffix(p, "_test.go") }
		min := 2 * max(c.docLen, c.qLen)
		tr, err := train.LoadByteFiles(root, ".go", func(p string) bool { return !isTest(p) }, min)
		if err != nil {
			return err
		}
		ho, err := train.LoadByteFiles(root, ".go", isTest, min)
		if err != nil {
			return err
		}
		trainSrc, heldSrc = tr, ho
		what = fmt.Sprintf("byte cuts of %d non-test Go files (training) and %d _test.go files (held out)", len(tr.Files), len(ho.Files))
	}
	start := time.Now()
	trainReqs, err := train.Requests(context.Background(), trainSrc, rand.New(rand.NewPCG(c.seed, 1)), c.trainN, 2, 3, c.docLen, c.qLen)
	if err != nil {
		return err
	}
	heldReqs, err := train.Requests(context.Background(), heldSrc, rand.New(rand.NewPCG(c.seed, 2)), c.heldN, 2, 5, c.docLen, c.qLen)
	if err != nil {
		return err
	}
	fitReqs := trainReqs
	if c.fitHeldout {
		fitReqs = heldReqs
	}
	exs, err := train.Examples(context.Background(), m, fitReqs, c.answer)
	if err != nil {
		return err
	}
	refs, err := references(m, heldReqs, c.cont)
	if err != nil {
		return err
	}
	var trainRefs []reference
	if c.evalTrain {
		if trainRefs, err = references(m, trainReqs, c.cont); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "%s: %d training examples, %d held-out references in %v\n", name, len(exs), len(refs), time.Since(start).Round(time.Millisecond))

	noneTrain, err := train.Loss(m, nil, exs)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "%s: training loss with no adapter %.4f\n", name, noneTrain)
	var rows []row
	none, err := evaluate(m, nil, heldReqs, refs)
	if err != nil {
		return err
	}
	rows = append(rows, row{"no adapter", none, "0 rows"})
	if c.evalTrain {
		s, err := evaluate(m, nil, trainReqs, trainRefs)
		if err != nil {
			return err
		}
		rows = append(rows, row{"no adapter, on the training requests", s, "0 rows"})
	}
	for _, o := range c.oracles {
		s, err := o.evaluate(m, heldReqs, refs)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "%s %s: held-out KL next %.4f cont %.4f\n", name, o.label, s.KLNext, s.KLCont)
		rows = append(rows, row{o.label, s, "0 rows"})
	}
	type size struct{ h, t int }
	var sizes []size
	for _, n := range c.ns {
		sizes = append(sizes, size{n, n})
	}
	for _, n := range c.headerOnly {
		sizes = append(sizes, size{n, 0})
	}
	ev := evalSet{heldReqs, refs, trainReqs, trainRefs, exs, none, noneTrain}
	for _, z := range sizes {
		r, err := oneAdapter(w, log, c, m, name, z.h, z.t, ev)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	alone, err := questionAlone(m, heldReqs, refs)
	if err != nil {
		return err
	}
	rows = append(rows, row{"question alone (documents ignored)", alone, "-"})

	fmt.Fprintf(w, "### %s\n\nDocuments and questions: %s. Held-out: %d requests, %d document tokens, %d scored positions.\n\n",
		file, what, len(heldReqs), docTokens(heldReqs), none.Positions)
	fmt.Fprintln(w, "| method | KL next (nats) | top-1 next | KL continuation (nats) | top-1 continuation | extra rows per packet, cost |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.4f | %.3f | %.4f | %.3f | %s |\n", r.label, r.s.KLNext, r.s.Top1Next, r.s.KLCont, r.s.Top1Cont, r.cost)
	}
	fmt.Fprintln(w)
	return nil
}

type row struct {
	label string
	s     scores
	cost  string
}

// evalSet is what every adapter of a model is measured on.
type evalSet struct {
	held      []train.Request
	refs      []reference
	train     []train.Request
	trainRefs []reference // nil without -eval-train
	exs       []*llama.PacketExample
	none      scores
	noneLoss  float64
}

func references(m *llama.Model, rs []train.Request, cont int) ([]reference, error) {
	var refs []reference
	for _, r := range rs {
		ref, err := fullReference(m, r, cont)
		if err != nil {
			return nil, err
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

func sizeLabel(init *adapter.Adapter, h, t int) string {
	switch {
	case init.HideHeader && t != h:
		return fmt.Sprintf("N_h = %d hidden, N_t = %d", h, t)
	case init.HideHeader:
		return fmt.Sprintf("N = %d, header hidden", h)
	case t != h:
		return fmt.Sprintf("N_h = %d, N_t = %d", h, t)
	}
	return fmt.Sprintf("N = %d", h)
}

// oneAdapter scores the initial adapter of nh + nt rows and, unless
// -no-train, trains it and scores the result.
func oneAdapter(w, log io.Writer, c config, m *llama.Model, name string, nh, nt int, ev evalSet) ([]row, error) {
	init, err := initial(m, c, nh, nt)
	if err != nil {
		return nil, err
	}
	label := sizeLabel(init, nh, nt)
	initS, err := evaluate(m, init, ev.held, ev.refs)
	if err != nil {
		return nil, err
	}
	initLoss, err := train.Loss(m, init, ev.exs)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "%s %s initial: training loss %.4f (none %.4f), held-out KL next %.4f cont %.4f (none %.4f %.4f)\n",
		name, label, initLoss, ev.noneLoss, initS.KLNext, initS.KLCont, ev.none.KLNext, ev.none.KLCont)
	rowsPer := init.StoredHeaderRows() + nt
	rows := []row{{label + ", initial (untrained)", initS, fmt.Sprintf("%d rows", rowsPer)}}
	if c.noTrain {
		return rows, nil
	}
	o := train.Options{Init: init, LR: c.lr, Epochs: c.epochs, Batch: c.batch, Workers: c.workers, Seed: c.seed}
	last := time.Now()
	o.Progress = func(p train.Progress) {
		if time.Since(last) > 30*time.Second {
			last = time.Now()
			fmt.Fprintf(log, "%s %s: step %d/%d epoch %d loss %.4f (%v)\n", name, label, p.Step, p.Steps, p.Epoch, p.Loss, p.Elapsed.Round(time.Second))
		}
	}
	o.Epoch = func(e train.EpochEnd) error {
		fmt.Fprintf(log, "%s %s: epoch %d loss %.4f (%v)", name, label, e.Epoch+1, e.Loss, e.Elapsed.Round(time.Second))
		if c.evalEvery > 0 && (e.Epoch+1)%c.evalEvery == 0 && e.Epoch+1 < c.epochs {
			s, err := evaluate(m, e.Adapter, ev.held, ev.refs)
			if err != nil {
				return err
			}
			fmt.Fprintf(log, "; held-out KL next %.4f top-1 %.3f, cont %.4f top-1 %.3f", s.KLNext, s.Top1Next, s.KLCont, s.Top1Cont)
		}
		fmt.Fprintln(log)
		return nil
	}
	res, err := train.Train(context.Background(), m, ev.exs, o)
	if err != nil {
		return nil, err
	}
	s, err := evaluate(m, res.Adapter, ev.held, ev.refs)
	if err != nil {
		return nil, err
	}
	endLoss, err := train.Loss(m, res.Adapter, ev.exs)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "%s %s trained: training loss %.4f -> %.4f (none %.4f), held-out KL next %.4f top-1 %.3f, cont %.4f top-1 %.3f (none %.4f %.4f)\n",
		name, label, initLoss, endLoss, ev.noneLoss, s.KLNext, s.Top1Next, s.KLCont, s.Top1Cont, ev.none.KLNext, ev.none.KLCont)
	rows = append(rows, row{label + ", trained", s, fmt.Sprintf("%d rows, %d B f32 (%d B bf16), trained in %.0f s (%d steps; epoch loss %.3f -> %.3f; training loss %.3f -> %.3f, no adapter %.3f)",
		rowsPer, res.Adapter.Bytes(), res.Adapter.Bytes()/2, res.Time.Seconds(), res.Steps, res.EpochLoss[0], res.EpochLoss[len(res.EpochLoss)-1], initLoss, endLoss, ev.noneLoss)})
	if ev.trainRefs != nil {
		ts, err := evaluate(m, res.Adapter, ev.train, ev.trainRefs)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "%s %s trained, on the training requests: KL next %.4f top-1 %.3f, cont %.4f top-1 %.3f\n", name, label, ts.KLNext, ts.Top1Next, ts.KLCont, ts.Top1Cont)
		rows = append(rows, row{label + ", trained, on the training requests", ts, fmt.Sprintf("%d rows", rowsPer)})
	}
	if c.save != "" {
		if err := saveAdapter(c.save, name, c, res.Adapter); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// saveAdapter writes a to dir as safetensors (f32), named after the model,
// its rows and the learning rate.
func saveAdapter(dir, name string, c config, a *adapter.Adapter) error {
	b, err := a.Encode(safetensors.F32)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := fmt.Sprintf("%s-h%d-t%d-hide%v-lr%g-e%d.safetensors", name, a.HeaderRows(), a.TrailerRows(), a.HideHeader, c.lr, c.epochs)
	return os.WriteFile(filepath.Join(dir, base), b, 0o644)
}

func docTokens(rs []train.Request) int {
	n := 0
	for _, r := range rs {
		for _, d := range r.Docs {
			n += len(d)
		}
	}
	return n
}

// initial is the adapter training starts from.
func initial(m *llama.Model, c config, nh, nt int) (*adapter.Adapter, error) {
	a, err := adapter.Init(m, nh, nt, c.seed)
	if err != nil || c.init == "stats" {
		return a, err
	}
	bos, err := m.Embed([]int{train.BOS})
	if err != nil {
		return nil, err
	}
	mean, _ := m.EmbeddingStats()
	fill := func(x []float32, row func(j int) float32) {
		for i := range x {
			x[i] = row(i % m.Dim)
		}
	}
	bosRow := func(j int) float32 { return bos[0][j] }
	meanRow := func(j int) float32 { return float32(mean[j]) }
	switch c.init {
	case "token":
		return adapter.InitToken(m, nh, nt, train.BOS)
	case "bos":
		fill(a.Header, bosRow)
		fill(a.Trailer, bosRow)
	case "bos-mean":
		fill(a.Header, bosRow)
		fill(a.Trailer, meanRow)
	case "bos-tok":
		tok, err := m.Embed([]int{c.trailerTok})
		if err != nil {
			return nil, err
		}
		fill(a.Header, bosRow)
		fill(a.Trailer, func(j int) float32 { return tok[0][j] })
	default:
		return nil, fmt.Errorf("-init %q: want stats, token, bos, bos-mean or bos-tok", c.init)
	}
	return a, nil
}
