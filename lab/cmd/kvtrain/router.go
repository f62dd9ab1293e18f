package main

import (
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/quality"
	"github.com/kvstore/kvstore/lab/router"
	"github.com/kvstore/kvstore/lab/train"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const routerLong = `Trains SeKV's zoom-in routers (per layer and KV head: the projection W,
the bias and the threshold tau, and with --recency a recency weight; the
base model frozen) on a long-context llama2.c checkpoint and stores them
as the store's router artifacts (sekv/router-w, sekv/router-bias,
sekv/tau, sekv/router-recency) for the model fingerprint of --model,
--dtype and --weights-id, where span memory's routing finds them: a
memory stored in bf16 rows finds routers stored with --dtype bf16.

Training windows are cut from the non-test .go files under --data
(default GOROOT/src; _test.go files, testdata and vendor left out, so
held-out evaluation on _test.go files stays unseen): --needles windows
carry a needle (a const definition at a random depth in [0, 0.9) and its
recall line at the end, lab/quality's format) and --text windows are
plain code whose last --tail tokens are decoded. Each window is
prefilled, its span memory built, and the decode steps run with full
attention: the examples are the steps' pre-RoPE queries and the
teacher's attention mass per span (lab/quality.RouterData). The loss
is lab/router's zoom BCE against that mass (weighed by --zoom-weight) plus --budget-weight times a
budget penalty towards zooming --share of the zoomable rows, plus, with
--kl W, W times SeKV's distillation term: KL(full attention's next-token
distribution || span memory's) at the windows' decode steps, the zooms
decided by the routers and differentiated straight through, both
through the threshold tau and through the cut of each layer's zoom
budget (soft decisions at temperatures --temp and --kl-temp;
lab/router.Distill). With --recency each router also learns a weight
rho of its span's recency, ln(pos+1) - ln(pos+1-end) for a query at
pos and a span ending at end, added to the routing logit (stored as
sekv/router-recency; SeKV's routers do not see positions, so without
the flag rho stays 0). Its memories are the span memories of each window
at each of --kl-budgets; each Adam step draws --kl-steps of their decode
steps. The whole is minimised by Adam for --steps steps at --lr.

The run's state (the examples built so far, the routers and Adam's
moments) is saved to --checkpoint every --checkpoint-every steps, after
each window, and when it stops; a run started with an existing
--checkpoint resumes from it (the data flags and --recency-init must
match). A progress
line goes to stderr. The first SIGINT or SIGTERM stops the run before
its next window or step, saves the checkpoint and stores nothing (exit
130).`

// routerFlags are router's flags, parsed.
type routerFlags struct {
	model                                 modelFlags
	data, checkpoint                      string
	needles, text, window, tail           int
	steps, checkpointEvery                int
	lr, budgetWeight, share, temp, klTemp float64
	zoomWeight                            float64
	recency                               bool
	recencyInit                           float64
	anchorAlpha                           float64
	seed                                  uint64
	kl                                    float64
	klBudgets                             []float64
	klSteps                               int
}

func (f *routerFlags) define(fs *pflag.FlagSet) {
	f.model.define(fs)
	fs.StringVar(&f.data, "data", "", "directory of the training .go files; _test.go files are left out (default GOROOT/src)")
	fs.StringVar(&f.checkpoint, "checkpoint", "kvtrain-router.ckpt", "checkpoint file: resumed from when it exists, written as the run goes")
	fs.IntVar(&f.needles, "needles", 24, "training windows with a needle")
	fs.IntVar(&f.text, "text", 8, "training windows of plain code")
	fs.IntVar(&f.window, "window", 2048, "window tokens")
	fs.IntVar(&f.tail, "tail", 64, "plain windows: decoded last tokens")
	fs.IntVar(&f.steps, "steps", 300, "Adam steps (full batch)")
	fs.IntVar(&f.checkpointEvery, "checkpoint-every", 50, "steps between checkpoints")
	fs.Float64Var(&f.lr, "lr", router.DefaultLR, "Adam learning rate")
	fs.Float64Var(&f.budgetWeight, "budget-weight", 1, "weight of the budget penalty")
	fs.Float64Var(&f.zoomWeight, "zoom-weight", 1, "weight of the zoom BCE against the teacher's attention mass (> 0)")
	fs.Float64Var(&f.recencyInit, "recency-init", 0, "the recency weight new routers start from (0: SeKV's routers); trained with --recency, held there without; a resumed run must give its checkpoint's")
	fs.BoolVar(&f.recency, "recency", false, "also train a recency weight per (layer, KV head): rho times the span's recency, ln(pos+1) - ln(pos+1-end), added to its routing logit (0 untrained, as in SeKV's routers, which do not see positions)")
	fs.Float64Var(&f.share, "share", 0.05, "budget penalty's target: the share of the zoomable rows zoomed")
	fs.Float64Var(&f.temp, "temp", 0.01, "temperature of the soft zoom decisions of the budget penalty")
	fs.Float64Var(&f.klTemp, "kl-temp", 0, "--kl: temperature of the soft decision of the budget's cut, the score of the first span a layer's zoom budget refuses (0: --temp)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the windows")
	fs.Float64Var(&f.kl, "kl", 0, "weight of the distillation term, KL(full || span memory) through straight-through zoom decisions (0: none)")
	fs.Float64SliceVar(&f.klBudgets, "kl-budgets", []float64{0.1, 0.25}, "GPU budgets (fractions of a window's KV) of the span memories the distillation term decodes over, one memory per window and budget")
	fs.IntVar(&f.klSteps, "kl-steps", 256, "decode steps the distillation term draws per Adam step (0: every one)")
	fs.Float64Var(&f.anchorAlpha, "anchor-alpha", 0, "span memory's anchors: tokens above mean + this many standard deviations of surprisal (0: segment's default); the same as the memories the routers will route (longctxquality -anchor-alpha)")
}

func (f *routerFlags) check() error {
	switch {
	case f.needles < 0 || f.text < 0 || f.needles+f.text < 1:
		return fmt.Errorf("%w: --needles and --text must be >= 0, one of them >= 1", errUsage)
	case f.window < 64 || f.tail < 1 || f.tail >= f.window/2:
		return fmt.Errorf("%w: --window must be >= 64, --tail in [1, window/2)", errUsage)
	case f.steps < 0 || f.checkpointEvery < 0 || !(f.lr > 0) || f.budgetWeight < 0 || !(f.share >= 0 && f.share <= 1) || !(f.temp > 0):
		return fmt.Errorf("%w: --steps, --checkpoint-every, --budget-weight >= 0, --lr, --temp > 0, --share in [0, 1]", errUsage)
	case f.checkpoint == "":
		return fmt.Errorf("%w: --checkpoint is required", errUsage)
	case !(f.zoomWeight > 0) || math.IsInf(f.zoomWeight, 0):
		return fmt.Errorf("%w: --zoom-weight must be finite and > 0, got %v", errUsage, f.zoomWeight)
	case math.IsNaN(f.anchorAlpha) || math.IsInf(f.anchorAlpha, 0):
		return fmt.Errorf("%w: --anchor-alpha must be finite", errUsage)
	case math.IsNaN(f.recencyInit) || math.IsInf(f.recencyInit, 0):
		return fmt.Errorf("%w: --recency-init must be finite", errUsage)
	case !(f.kl >= 0) || f.klSteps < 0 || (f.kl > 0 && len(f.klBudgets) == 0) || !(f.klTemp >= 0):
		return fmt.Errorf("%w: --kl >= 0, --kl-steps >= 0, --kl-temp >= 0, --kl-budgets not empty with --kl", errUsage)
	}
	for _, b := range f.klBudgets {
		if !(b > 0 && b <= 1) {
			return fmt.Errorf("%w: --kl-budgets must lie in (0, 1], got %v", errUsage, b)
		}
	}
	return nil
}

// dataKey is what the examples depend on: a checkpoint built with other
// data flags is refused.
func (f *routerFlags) dataKey(fp format.Fingerprint) string {
	key := fmt.Sprintf("%s needles=%d text=%d window=%d tail=%d seed=%d data=%s", fp, f.needles, f.text, f.window, f.tail, f.seed, f.data)
	if f.anchorAlpha != 0 {
		key += fmt.Sprintf(" anchor-alpha=%g", f.anchorAlpha)
	}
	return key
}

// routerCheckpoint is a router run's saved state.
type routerCheckpoint struct {
	Key      string
	Windows  int // windows whose examples are built (left out ones too)
	Skipped  int // windows left out: span memory not built
	Examples []router.Example
	Distill  []router.Window // the distillation term's, with --kl
	// KLBudgets are the budgets of Distill's memories (nil: built
	// without --kl, so no distillation windows).
	KLBudgets []float64
	Init      [][]float32   // the untrained projections, from the first window
	State     *router.State // nil until training starts
	Shape     [4]int        // layers, kv heads, dim, head dim
	// RecencyInit is the --recency-init State's routers started from (nil
	// in a checkpoint saved before it was kept).
	RecencyInit *float64
}

func (c *routerCheckpoint) save(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	err = gob.NewEncoder(tmp).Encode(c)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return nil
}

// loadRouterCheckpoint reads path; nil, nil when there is none.
func loadRouterCheckpoint(path string) (*routerCheckpoint, error) {
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer fh.Close()
	var c routerCheckpoint
	if err := gob.NewDecoder(fh).Decode(&c); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return &c, nil
}

// routerCommand is the router verb; *ran is set when its body runs.
func routerCommand(e *env, ran *bool) *cobra.Command {
	var f routerFlags
	return verb("router --dir STORE [--create] --model CKPT", "train SeKV span-memory routers on a long-context llama2.c checkpoint and store them",
		routerLong, &f, ran, func(ctx context.Context) error { return runRouter(ctx, e, &f) })
}

// routerReport is what router prints.
type routerReport struct {
	Model     string   `json:"model_fingerprint"`
	Artifacts []string `json:"artifacts"`
	Windows   int      `json:"windows"`
	Skipped   int      `json:"windows_left_out"`
	Steps     int      `json:"steps"`
	FirstLoss float64  `json:"first_loss"`
	Loss      float64  `json:"loss"`
	Spent     float64  `json:"zoom_share"`
	FirstKL   float64  `json:"first_kl,omitempty"`
	KL        float64  `json:"kl,omitempty"`
}

func (r *routerReport) write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "routers    %s\nmodel      %s\nwindows    %d (%d left out)\nloss       %.5f (start) -> %.5f after %d steps, soft zoom share %.3f\n",
		strings.Join(r.Artifacts, " "), r.Model, r.Windows, r.Skipped, r.FirstLoss, r.Loss, r.Steps, r.Spent)
	if r.FirstKL > 0 {
		fmt.Fprintf(w, "kl         %.5f (start) -> %.5f\n", r.FirstKL, r.KL)
	}
	return nil
}

// runRouter builds the examples f asks for (or resumes them), trains the
// routers and stores them.
func runRouter(ctx context.Context, e *env, f *routerFlags) error {
	m, fp, db, err := begin(e, f.check, &f.model)
	if err != nil {
		return err
	}
	defer db.Close()
	if f.data == "" {
		if f.data, err = quality.GoSrcDir(""); err != nil {
			return err
		}
	}
	ck, err := loadRouterCheckpoint(f.checkpoint)
	if err != nil {
		return err
	}
	key := f.dataKey(fp)
	switch {
	case ck == nil:
		ck = &routerCheckpoint{Key: key}
	case ck.Key != key:
		return fmt.Errorf("%w: checkpoint %s was built for %q, not %q", errUsage, f.checkpoint, ck.Key, key)
	case f.kl > 0 && ck.Windows > 0 && ck.KLBudgets == nil:
		return fmt.Errorf("%w: checkpoint %s was built without --kl: it holds no distillation windows", errUsage, f.checkpoint)
	case f.kl > 0 && ck.Windows > 0 && !slices.Equal(ck.KLBudgets, f.klBudgets):
		return fmt.Errorf("%w: checkpoint %s holds distillation windows at budgets %v, not --kl-budgets %v", errUsage, f.checkpoint, ck.KLBudgets, f.klBudgets)
	case f.recency && len(ck.Examples) > 0 && ck.Examples[0].Ends == nil:
		return fmt.Errorf("%w: checkpoint %s was built without the spans' positions that --recency needs: build it again", errUsage, f.checkpoint)
	case ck.State != nil && ck.RecencyInit != nil && *ck.RecencyInit != f.recencyInit:
		// The weights started long ago: a new start would be ignored.
		return fmt.Errorf("%w: checkpoint %s holds routers started from --recency-init %v, not %v", errUsage, f.checkpoint, *ck.RecencyInit, f.recencyInit)
	}
	if ck.State != nil {
		ck.State.FillRecency() // a state saved before the recency weights
	}
	if f.kl > 0 {
		ck.KLBudgets = f.klBudgets
	}
	p := newProgress(e.stderr, "kvtrain router")
	defer p.done()
	if err := routerExamples(ctx, m, f, ck, p); err != nil {
		return err
	}
	if ck.State == nil {
		params, err := router.New(ck.Shape[0], ck.Shape[1], ck.Shape[2], ck.Shape[3], ck.Init)
		if err != nil {
			return err
		}
		for g := range params.Recency {
			params.Recency[g] = f.recencyInit
		}
		ck.State = router.NewState(params)
		ck.RecencyInit = &f.recencyInit
	}
	lo := router.Options{Zoom: f.zoomWeight, Budget: f.budgetWeight, Share: f.share, Temp: f.temp, KL: f.kl, CutTemp: f.klTemp, Recency: f.recency}
	first, err := routerLoss(m, ck, lo, f.klSteps)
	if err != nil {
		return err
	}
	start := time.Now()
	var last *router.Grad
	err = router.Train(ctx, ck.State, ck.Examples, router.TrainOptions{Loss: lo, Steps: f.steps, LR: f.lr,
		CheckpointEvery: f.checkpointEvery, Model: m, Windows: ck.Distill, KLSteps: f.klSteps,
		Checkpoint: func(*router.State) error { return ck.save(f.checkpoint) },
		Progress: func(s *router.State, g *router.Grad) {
			last = g
			kl := ""
			if f.kl > 0 {
				kl = fmt.Sprintf(", kl %.5f", g.KL)
			}
			p.step(fmt.Sprintf("step %d/%d, loss %.5f, bce %.5f%s, zoom share %.3f, %v", s.Step, f.steps, g.Loss, g.BCE, kl, g.Spent, time.Since(start).Round(time.Second)))
		}})
	p.done()
	if err != nil {
		return err
	}
	if last == nil || lo.KL > 0 {
		// With the distillation term, over the first step's draw again,
		// so that the report's two KLs are of the same steps.
		if last, err = routerLoss(m, ck, lo, f.klSteps); err != nil {
			return err
		}
	}
	arts, err := ck.State.Params.Artifacts()
	if err != nil {
		return err
	}
	if err := ck.State.Params.Put(db, fp); err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	r := &routerReport{Model: fp.String(), Windows: ck.Windows - ck.Skipped, Skipped: ck.Skipped, Steps: ck.State.Step,
		FirstLoss: first.Loss, Loss: last.Loss, Spent: last.Spent, FirstKL: first.KL, KL: last.KL}
	for _, a := range arts {
		r.Artifacts = append(r.Artifacts, a.Name)
	}
	return r.write(e.stdout, e.json)
}

// routerLoss is the loss of ck's routers over its examples and, with
// lo.KL, the distillation term over the first Adam step's draw of steps.
func routerLoss(m *llama.Model, ck *routerCheckpoint, lo router.Options, klSteps int) (*router.Grad, error) {
	g, err := router.Loss(ck.State.Params, ck.Examples, lo)
	if err != nil || lo.KL == 0 {
		return g, err
	}
	refs := router.SampleRefs(router.Refs(ck.Distill), klSteps, 0)
	return g, router.Distill(m, ck.State.Params, ck.Distill, refs, lo, g)
}

// routerExamples builds the examples of the windows ck has not built yet,
// saving ck after each; once ctx is done it saves ck and returns ctx's
// error, wrapped.
func routerExamples(ctx context.Context, m *llama.Model, f *routerFlags, ck *routerCheckpoint, p *progress) error {
	total := f.needles + f.text
	if ck.Windows >= total {
		return nil
	}
	files, err := train.LoadByteFiles(f.data, ".go", func(path string) bool { return !strings.HasSuffix(path, "_test.go") }, f.window+256)
	if err != nil {
		return err
	}
	lc := quality.LongConfig{Model: m}
	lc.Span.Segment.AnchorAlpha = f.anchorAlpha
	for i := ck.Windows; i < total; i++ {
		if err := ctx.Err(); err != nil {
			if serr := ck.save(f.checkpoint); serr != nil {
				return serr
			}
			return fmt.Errorf("stopped before window %d: %w", i+1, err)
		}
		p.stage(fmt.Sprintf("window %d/%d: prefill, span memory, teacher", i+1, total))
		ctxToks, cont, err := routerWindow(files, f, i)
		if err != nil {
			return err
		}
		var budgets []float64
		if f.kl > 0 {
			budgets = f.klBudgets
		}
		set, err := lc.RouterData(ctxToks, cont, budgets)
		switch {
		case errors.Is(err, quality.ErrSpanBuild):
			ck.Skipped++
		case err != nil:
			return fmt.Errorf("window %d: %w", i+1, err)
		default:
			ck.Examples = append(ck.Examples, set.Examples...)
			ck.Distill = append(ck.Distill, set.Windows...)
			if ck.Init == nil {
				ck.Init = set.Init
				ck.Shape = [4]int{m.Layers, m.KVHeads, len(set.Init[0]) / m.HeadDim(), m.HeadDim()}
			}
		}
		ck.Windows = i + 1
		if err := ck.save(f.checkpoint); err != nil {
			return err
		}
	}
	if ck.Init == nil {
		return fmt.Errorf("every one of %d windows left out: span memory not built", total)
	}
	return nil
}

// routerWindow is training window i (its own seeded draw, so that a
// resumed run draws the same): a needle for i < --needles, else plain code
// whose last --tail tokens are the continuation.
func routerWindow(files *train.ByteFiles, f *routerFlags, i int) (ctx, cont []int, err error) {
	rng := rand.New(rand.NewPCG(f.seed, uint64(i)))
	chunk, err := files.Chunk(rng, f.window+256)
	if err != nil {
		return nil, nil, err
	}
	b := make([]byte, len(chunk))
	for j, c := range chunk {
		b[j] = byte(c)
		if c == quality.GoBOS {
			b[j] = ' '
		}
	}
	// Start at a line start, as a file does.
	if nl := strings.IndexByte(string(b[:256]), '\n'); nl >= 0 {
		b = b[nl+1:]
	}
	if i >= f.needles {
		toks := []int{quality.GoBOS}
		for _, c := range b[:f.window-1] {
			toks = append(toks, int(c))
		}
		n := f.window - f.tail
		return toks[:n], toks[n:], nil
	}
	nd, err := quality.NewNeedle(b, f.window, 1, 0.9*rng.Float64(), rng)
	if err != nil {
		return nil, nil, fmt.Errorf("window %d: %w", i+1, err)
	}
	return nd.Tokens[:nd.Context], nd.Tokens[nd.Context:], nil
}
