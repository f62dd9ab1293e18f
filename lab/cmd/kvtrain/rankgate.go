package main

import (
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/rankgate"
	"github.com/kvstore/kvstore/lab/train"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store"
)

const rankgateLong = `Trains SeKV's rank gate g_phi (lab/rankgate) on a llama2.c checkpoint
and stores it as the model's sekv/rank-gate artifact, which span memory
builds then use to choose each span's factor rank in place of the energy
threshold. The base model is frozen: --contexts contexts of --context-len
tokens (BOS, then a byte cut of a non-_test .go file under --data) are
prefilled and cut into spans as span memory does; each factored span's
keys and values in every (layer, KV head) is one sample; Adam minimises
the gated-spectrum reconstruction error plus --lambda times the expected
stored bytes (over raw bf16). With --heldout N, N contexts cut from the
_test.go files under --data measure the gate against the energy
threshold (default, and at equal total bytes) before it is stored.

The artifact is bound to the model fingerprint of --model, --dtype and
--weights-id (as the adapter verb's). A progress line goes to stderr.
With --checkpoint FILE the run saves its samples and training state
there when interrupted (and when training and measuring end) and resumes
from it when started again: the samples serve any run with the same
model, data, contexts, context length, r_max and seed; the training state
only one with the same training flags too (otherwise training starts over
on the saved samples). The first SIGINT or SIGTERM stops the
run before its next context or step: the checkpoint is saved, nothing is
stored (exit 130).`

// rankgateFlags are rankgate's flags, parsed.
type rankgateFlags struct {
	model                      modelFlags
	data, checkpoint           string
	contexts, heldout, length  int
	rmax, hidden, steps, batch int
	lambda, lr                 float64
	seed                       uint64
}

func (f *rankgateFlags) define(fs *pflag.FlagSet) {
	f.model.define(fs)
	fs.StringVar(&f.data, "data", "", "directory of .go files (e.g. $(go env GOROOT)/src): non-_test files train, _test.go files are held out (required)")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "file to save the run in when interrupted and resume it from")
	fs.IntVar(&f.contexts, "contexts", 32, "training contexts")
	fs.IntVar(&f.heldout, "heldout", 0, "held-out contexts to measure the gate on (0: none)")
	fs.IntVar(&f.length, "context-len", 1024, "tokens per context")
	fs.IntVar(&f.rmax, "r-max", 32, "r_max: the most components a span keeps")
	fs.IntVar(&f.hidden, "hidden", 32, "hidden width of g_phi")
	fs.IntVar(&f.steps, "steps", 2000, "Adam steps")
	fs.IntVar(&f.batch, "batch", 256, "samples per step")
	fs.Float64Var(&f.lambda, "lambda", 0.5, "weight of the bytes budget")
	fs.Float64Var(&f.lr, "lr", 3e-3, "Adam step size")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the contexts, the initialisation and the batches")
}

func (f *rankgateFlags) check() error {
	switch {
	case f.data == "":
		return fmt.Errorf("%w: --data is required", errUsage)
	case f.contexts < 1 || f.heldout < 0 || f.length < 2:
		return fmt.Errorf("%w: --contexts must be >= 1, --heldout >= 0, --context-len >= 2", errUsage)
	case f.rmax < 1 || f.rmax > 1024 || f.hidden < 1 || f.hidden > 1024 || f.steps < 1 || f.batch < 1:
		return fmt.Errorf("%w: --r-max, --hidden, --steps and --batch must be in [1, 1024] (--steps, --batch >= 1)", errUsage)
	case !(f.lr > 0) || !(f.lambda >= 0):
		return fmt.Errorf("%w: --lr must be > 0, --lambda >= 0", errUsage)
	}
	return nil
}

// dataKey names the flags a checkpoint's samples depend on; trainKey
// those its training state depends on as well.
func (f *rankgateFlags) dataKey() string {
	return fmt.Sprintf("%s|%s|%s|%s|%d|%d|%d|%d", f.model.path, f.model.dtype, f.model.weights, f.data,
		f.contexts, f.length, f.rmax, f.seed)
}

func (f *rankgateFlags) trainKey() string {
	return fmt.Sprintf("%d|%d|%d|%g|%g", f.hidden, f.steps, f.batch, f.lambda, f.lr)
}

// rankgateCheckpoint is a saved run: the samples, drawn once for its data
// flags, and the training state for its training flags.
type rankgateCheckpoint struct {
	DataKey, TrainKey string
	Samples           []*rankgate.Sample
	Drawn             int // contexts drawn
	Skipped           int // of them, left out: a span's SVD failed (rankgate.ErrSpanSVD)
	State             *rankgate.State
	Losses            []float64
	// Held-out samples, contexts drawn and left out.
	Heldout                []*rankgate.Sample
	HeldDrawn, HeldSkipped int
}

// rankgateCommand is the rankgate verb; *ran is set when its body runs.
func rankgateCommand(e *env, ran *bool) *cobra.Command {
	var f rankgateFlags
	return verb("rankgate --dir STORE [--create] --model CKPT --data DIR", "train SeKV's rank gate g_phi on a llama2.c checkpoint and store it",
		rankgateLong, &f, ran, func(ctx context.Context) error { return runRankGate(ctx, e, &f) })
}

// rankgateReport is what rankgate prints.
type rankgateReport struct {
	Artifact    string           `json:"artifact"`
	Model       string           `json:"model_fingerprint"`
	Samples     int              `json:"samples"`
	Skipped     int              `json:"skipped_contexts"`
	FirstLoss   float64          `json:"first_loss"`
	LastLoss    float64          `json:"last_loss"`
	Steps       int              `json:"steps"`
	TrainSecond float64          `json:"train_seconds"`
	Heldout     *rankgateHeldout `json:"heldout,omitempty"`
}

// rankgateHeldout is the held-out comparison: per span stored bytes
// (fraction of raw bf16) and relative reconstruction error.
type rankgateHeldout struct {
	Samples     int              `json:"samples"`
	Skipped     int              `json:"skipped_contexts"`
	Gate        rankgate.Summary `json:"gate"`
	Energy      rankgate.Summary `json:"energy_default"`
	EqualBytes  rankgate.Summary `json:"energy_equal_bytes"`
	EqualEnergy float64          `json:"equal_bytes_energy"`
	// Oracle is rankgate.CostPolicy at equal total bytes: what a perfect
	// g_phi of the same objective would keep.
	Oracle     rankgate.Summary `json:"oracle_equal_bytes"`
	OracleCost float64          `json:"oracle_cost_threshold"`
}

func runRankGate(ctx context.Context, e *env, f *rankgateFlags) error {
	m, fp, db, err := begin(e, f.check, &f.model)
	if err != nil {
		return err
	}
	defer db.Close()
	ck, err := f.load()
	if err != nil {
		return err
	}
	p := newProgress(e.stderr, "kvtrain rankgate")
	defer p.done()
	isTest := func(path string) bool { return strings.HasSuffix(path, "_test.go") }
	if ck.Drawn < f.contexts {
		files, err := train.LoadByteFiles(f.data, ".go", func(path string) bool { return !isTest(path) }, f.length)
		if err != nil {
			return err
		}
		if err := f.draw(ctx, m, files, ck, p); err != nil {
			return f.save(ck, err)
		}
	}
	if ck.State == nil {
		params, err := rankgate.NewParams(f.rmax, f.hidden, f.seed)
		if err != nil {
			return err
		}
		ck.State = rankgate.NewState(params)
	}
	o := rankgate.Options{Lambda: f.lambda, Steps: f.steps, Batch: f.batch, LR: f.lr, Seed: f.seed}
	start := time.Now()
	p.stage(fmt.Sprintf("training on %d samples from step %d", len(ck.Samples), ck.State.Step))
	err = rankgate.Train(ctx, ck.State, ck.Samples, o, func(step int, loss float64) {
		ck.Losses = append(ck.Losses, loss)
		p.step(fmt.Sprintf("step %d/%d, loss %.4f, %v", step, f.steps, loss, time.Since(start).Round(time.Second)))
	})
	if err := f.save(ck, err); err != nil {
		return err
	}
	gate := ck.State.P.Gate()
	if len(ck.Samples) == 0 {
		return fmt.Errorf("no training samples (%d contexts left out: a span's SVD failed)", ck.Skipped)
	}
	r := &rankgateReport{Artifact: store.ArtifactRankGate, Model: fp.String(), Samples: len(ck.Samples), Skipped: ck.Skipped, Steps: ck.State.Step,
		FirstLoss: ck.Losses[0], LastLoss: ck.Losses[len(ck.Losses)-1], TrainSecond: time.Since(start).Seconds()}
	if f.heldout > 0 {
		files, err := train.LoadByteFiles(f.data, ".go", isTest, f.length)
		if err != nil {
			return err
		}
		if r.Heldout, err = f.measure(ctx, m, files, gate, ck, p); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("trained, not stored: %w", err)
	}
	data, meta, err := store.EncodeRankGate(gate)
	if err != nil {
		return err
	}
	meta.Note = fmt.Sprintf("kvtrain rankgate lambda=%g steps=%d contexts=%d", f.lambda, f.steps, f.contexts)
	if err := db.PutArtifact(fp, store.ArtifactRankGate, data, meta); err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	return r.write(e.stdout, e.json)
}

// draw prefills the contexts not drawn yet (context i from its own
// seed, so that a resumed run draws what an unbroken one would).
func (f *rankgateFlags) draw(ctx context.Context, m *llama.Model, files *train.ByteFiles, ck *rankgateCheckpoint, p *progress) error {
	for ; ck.Drawn < f.contexts; ck.Drawn++ {
		p.step(fmt.Sprintf("context %d/%d, %d samples", ck.Drawn+1, f.contexts, len(ck.Samples)))
		s, err := rankgate.Contexts(ctx, m, files, rand.New(rand.NewPCG(f.seed, uint64(ck.Drawn))), 1, f.length, f.rmax, segment.Options{})
		if errors.Is(err, rankgate.ErrSpanSVD) {
			ck.Skipped++
			continue
		}
		if err != nil {
			return err
		}
		ck.Samples = append(ck.Samples, s...)
	}
	return nil
}

// measure compares the gate with the energy threshold on held-out
// contexts.
func (f *rankgateFlags) measure(ctx context.Context, m *llama.Model, files *train.ByteFiles, gate *store.RankGate, ck *rankgateCheckpoint, p *progress) (*rankgateHeldout, error) {
	if ck.HeldDrawn > f.heldout {
		// Saved for more held-out contexts than asked: draw them again.
		ck.Heldout, ck.HeldDrawn, ck.HeldSkipped = nil, 0, 0
	}
	for ; ck.HeldDrawn < f.heldout; ck.HeldDrawn++ {
		p.step(fmt.Sprintf("held-out context %d/%d", ck.HeldDrawn+1, f.heldout))
		s, err := rankgate.Contexts(ctx, m, files, rand.New(rand.NewPCG(f.seed, 1<<32|uint64(ck.HeldDrawn))), 1, f.length, f.rmax, segment.Options{})
		if errors.Is(err, rankgate.ErrSpanSVD) {
			ck.HeldSkipped++
			continue
		}
		if err != nil {
			return nil, f.save(ck, err)
		}
		ck.Heldout = append(ck.Heldout, s...)
	}
	if err := f.save(ck, nil); err != nil {
		return nil, err
	}
	samples, skipped := ck.Heldout, ck.HeldSkipped
	if len(samples) == 0 {
		return nil, fmt.Errorf("no held-out samples (%d of %d contexts left out: a span's SVD failed)", skipped, f.heldout)
	}
	h := &rankgateHeldout{Samples: len(samples), Skipped: skipped, Gate: rankgate.Evaluate(samples, rankgate.GatePolicy(gate)),
		Energy: rankgate.Evaluate(samples, rankgate.EnergyPolicy(0.99))}
	h.EqualEnergy = rankgate.MatchEnergy(samples, h.Gate.TotalBytes)
	h.EqualBytes = rankgate.Evaluate(samples, rankgate.EnergyPolicy(h.EqualEnergy))
	h.OracleCost = rankgate.MatchCost(samples, h.Gate.TotalBytes)
	h.Oracle = rankgate.Evaluate(samples, rankgate.CostPolicy(h.OracleCost))
	return h, nil
}

// load reads --checkpoint, or starts afresh when there is none (or no
// file yet).
func (f *rankgateFlags) load() (*rankgateCheckpoint, error) {
	ck := &rankgateCheckpoint{DataKey: f.dataKey(), TrainKey: f.trainKey()}
	if f.checkpoint == "" {
		return ck, nil
	}
	r, err := os.Open(f.checkpoint)
	if errors.Is(err, fs.ErrNotExist) {
		return ck, nil
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var got rankgateCheckpoint
	if err := gob.NewDecoder(r).Decode(&got); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", f.checkpoint, err)
	}
	if got.DataKey != ck.DataKey {
		return nil, fmt.Errorf("%w: checkpoint %s is of other data flags (%s)", errUsage, f.checkpoint, got.DataKey)
	}
	if got.TrainKey != ck.TrainKey {
		// The samples serve other training flags: training starts over.
		got.TrainKey, got.State, got.Losses = ck.TrainKey, nil, nil
	}
	return &got, nil
}

// save writes ck to --checkpoint (when given; atomically) and returns
// cause, or the save's error when cause is nil.
func (f *rankgateFlags) save(ck *rankgateCheckpoint, cause error) error {
	if f.checkpoint == "" {
		return cause
	}
	tmp := f.checkpoint + ".tmp"
	w, err := os.Create(tmp)
	if err == nil {
		err = gob.NewEncoder(w).Encode(ck)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, f.checkpoint)
	}
	if err != nil {
		err = fmt.Errorf("saving checkpoint %s: %w", f.checkpoint, err)
		return errors.Join(cause, err)
	}
	return cause
}

func (r *rankgateReport) write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "artifact   %s\nmodel      %s\nsamples    %d (%d contexts left out: a span's SVD failed)\nloss       %.4f (first step) -> %.4f (last), %d steps in %.1f s\n",
		r.Artifact, r.Model, r.Samples, r.Skipped, r.FirstLoss, r.LastLoss, r.Steps, r.TrainSecond)
	if h := r.Heldout; h != nil {
		fmt.Fprintf(w, "held out   %d samples (%d contexts left out); per span: bytes/raw bf16 median worst, rel. error median worst, total bytes, mean rank\n", h.Samples, h.Skipped)
		for _, row := range []struct {
			name string
			s    rankgate.Summary
		}{{"gate", h.Gate}, {"energy 0.99", h.Energy}, {fmt.Sprintf("energy %.4f", h.EqualEnergy), h.EqualBytes}, {"oracle", h.Oracle}} {
			fmt.Fprintf(w, "  %-13s %.4f %.4f  %.4f %.4f  %.4f  %.2f\n", row.name, row.s.Bytes.Median, row.s.Bytes.Worst,
				row.s.Err.Median, row.s.Err.Worst, row.s.TotalBytes, row.s.MeanRank)
		}
	}
	return nil
}
