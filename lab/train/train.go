// Package train trains KV Packet adapters (package adapter) on models
// kvstore runs on a CPU (lab/llama), as the reference does: the base
// model frozen, the teacher the model reading the documents and the
// question as one sequence and greedy-generating an answer, the student
// the same question and answer read over the documents' packets assembled
// with the adapter, the loss KL(teacher || student) over the answer
// tokens, minimised by AdamW (lr 5e-4, no weight decay, linear decay).
// The gradient is lab/llama's hand-written backward pass
// (Model.PacketLoss), in float64. Training is deterministic: the same
// model, examples and Options give the same adapter bit for bit.
package train

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
)

// The reference model is the model adapters train on.
var _ adapter.Model = (*llama.Model)(nil)

// Options are the training settings; EnsureDefaults fills the zero ones.
type Options struct {
	Header, Trailer int     // adapter rows; default 8 each (set -1 for none)
	LR              float64 // peak learning rate, decayed linearly to 0; default 5e-4
	Epochs          int     // passes over the examples; default 30
	Batch           int     // examples per step (gradients averaged); default 1
	Beta1, Beta2    float64 // AdamW moments; default 0.9, 0.999
	Eps             float64 // AdamW epsilon; default 1e-8
	WeightDecay     float64 // decoupled weight decay; 0 (the reference uses none)
	Seed            uint64  // initialisation and example order
	// Init, when not nil, is the adapter training starts from (its rows
	// override Header and Trailer, and its HideHeader is kept: a hidden
	// header is trained through the document rows it shapes); else
	// adapter.Init(m, Header, Trailer, Seed), the reference's
	// initialisation. adapter.InitToken (a hidden BOS header) is the one
	// that beats plain packets on kvstore's test models (docs/quality.md).
	Init *adapter.Adapter
	// Workers computes a batch's examples on this many goroutines (default
	// 1); the result does not depend on it.
	Workers int
	// Progress, when not nil, is called after every step.
	Progress func(Progress)
	// Epoch, when not nil, is called after every epoch with its mean loss
	// and a copy of the adapter as it stands (to log, evaluate or save);
	// an error it returns stops training and is returned.
	Epoch func(EpochEnd) error
}

// EpochEnd is reported after each epoch.
type EpochEnd struct {
	Epoch   int              // 0-based
	Loss    float64          // the epoch's mean training loss (as Result.EpochLoss)
	Adapter *adapter.Adapter // the adapter after the epoch's last step (no TrainConfig)
	Elapsed time.Duration
}

// EnsureDefaults sets the documented defaults of zero fields.
func (o *Options) EnsureDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Header, 8)
	def(&o.Trailer, 8)
	def(&o.Epochs, 30)
	def(&o.Batch, 1)
	def(&o.Workers, 1)
	if o.Header < 0 {
		o.Header = 0
	}
	if o.Trailer < 0 {
		o.Trailer = 0
	}
	deff := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	deff(&o.LR, 5e-4)
	deff(&o.Beta1, 0.9)
	deff(&o.Beta2, 0.999)
	deff(&o.Eps, 1e-8)
}

// Validate checks o after EnsureDefaults.
func (o *Options) Validate() error {
	switch {
	case o.Header+o.Trailer == 0:
		return fmt.Errorf("%w: train: an adapter of no rows", format.ErrInvalidArgument)
	case !(o.LR > 0) || o.Epochs < 1 || o.Batch < 1 || o.Workers < 1:
		return fmt.Errorf("%w: train: lr %v, %d epochs, batch %d, %d workers", format.ErrInvalidArgument, o.LR, o.Epochs, o.Batch, o.Workers)
	case !(o.Beta1 >= 0 && o.Beta1 < 1 && o.Beta2 >= 0 && o.Beta2 < 1 && o.Eps > 0 && o.WeightDecay >= 0):
		return fmt.Errorf("%w: train: betas %v %v, eps %v, weight decay %v", format.ErrInvalidArgument, o.Beta1, o.Beta2, o.Eps, o.WeightDecay)
	}
	return nil
}

// Progress is reported after each step.
type Progress struct {
	Step, Steps int
	Epoch       int
	Loss        float64 // the step's mean loss, before its update
	Elapsed     time.Duration
}

// Result is a trained adapter and how training went.
type Result struct {
	Adapter *adapter.Adapter
	// EpochLoss[e] is the mean training loss over epoch e, each example's
	// loss taken before the step that used it.
	EpochLoss []float64
	Steps     int
	Time      time.Duration
}

// Config is the training config recorded with the adapter (its
// TrainConfig, JSON).
type Config struct {
	Method      string     `json:"method"`
	Loss        string     `json:"loss"`
	Header      int        `json:"n_header"`
	HideHeader  bool       `json:"hide_header,omitempty"`
	Trailer     int        `json:"n_trailer"`
	LR          float64    `json:"lr"`
	Schedule    string     `json:"schedule"`
	WeightDecay float64    `json:"weight_decay"`
	Betas       [2]float64 `json:"betas"`
	Eps         float64    `json:"eps"`
	Epochs      int        `json:"epochs"`
	Batch       int        `json:"batch_size"`
	Seed        uint64     `json:"seed"`
	Examples    int        `json:"examples"`
	Steps       int        `json:"steps"`
	FinalLoss   float64    `json:"final_epoch_loss"`
	Seconds     float64    `json:"train_seconds"`
}

// Train trains an adapter for m on examples (see Example), starting from
// adapter.Init(m, o.Header, o.Trailer, o.Seed). ctx is checked before
// every step: once it is done, Train returns its error (context.Canceled
// or DeadlineExceeded, wrapped, naming the step) and no adapter.
func Train(ctx context.Context, m *llama.Model, examples []*llama.PacketExample, o Options) (*Result, error) {
	if o.Init != nil {
		o.Header, o.Trailer = o.Init.HeaderRows(), o.Init.TrailerRows()
		if o.Header == 0 {
			o.Header = -1
		}
		if o.Trailer == 0 {
			o.Trailer = -1
		}
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if len(examples) == 0 {
		return nil, fmt.Errorf("%w: train: no examples", format.ErrInvalidArgument)
	}
	init := o.Init
	if init == nil {
		var err error
		if init, err = adapter.Init(m, o.Header, o.Trailer, o.Seed); err != nil {
			return nil, err
		}
	} else if init.Dim != m.Dim {
		return nil, fmt.Errorf("%w: train: initial adapter %d wide, model dim %d", format.ErrInvalidArgument, init.Dim, m.Dim)
	}
	start := time.Now()
	nh := len(init.Header)
	theta := append(to64(init.Header), to64(init.Trailer)...)
	opt := newAdamW(len(theta), &o)
	perEpoch := (len(examples) + o.Batch - 1) / o.Batch
	steps := perEpoch * o.Epochs
	res := &Result{Steps: steps}
	rng := rand.New(rand.NewPCG(o.Seed, 0x747261696e)) // "train"
	order := make([]int, len(examples))
	grad := make([]float64, len(theta))
	step := 0
	for e := range o.Epochs {
		for i := range order {
			order[i] = i
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		var sum float64
		for b := 0; b < len(order); b += o.Batch {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("train: stopped before step %d of %d: %w", step+1, steps, err)
			}
			batch := order[b:min(b+o.Batch, len(order))]
			loss, err := batchGrad(m, theta[:nh], theta[nh:], examples, batch, grad, o.Workers, init.HideHeader)
			if err != nil {
				return nil, err
			}
			sum += loss * float64(len(batch))
			lr := o.LR * (1 - float64(step)/float64(steps))
			opt.step(theta, grad, lr)
			step++
			if o.Progress != nil {
				o.Progress(Progress{Step: step, Steps: steps, Epoch: e, Loss: loss, Elapsed: time.Since(start)})
			}
		}
		res.EpochLoss = append(res.EpochLoss, sum/float64(len(order)))
		if o.Epoch != nil {
			cur := &adapter.Adapter{Dim: m.Dim, Header: to32(theta[:nh]), Trailer: to32(theta[nh:]), HideHeader: init.HideHeader}
			if err := o.Epoch(EpochEnd{Epoch: e, Loss: res.EpochLoss[e], Adapter: cur, Elapsed: time.Since(start)}); err != nil {
				return nil, fmt.Errorf("train: after epoch %d: %w", e, err)
			}
		}
	}
	res.Time = time.Since(start)
	a := &adapter.Adapter{Dim: m.Dim, Header: to32(theta[:nh]), Trailer: to32(theta[nh:]), HideHeader: init.HideHeader}
	cfg := Config{Method: "kv-packet self-distillation, base model frozen",
		Loss:   "KL(teacher || student) over the greedy answer tokens, teacher = documents and question as one sequence",
		Header: o.Header, HideHeader: init.HideHeader, Trailer: o.Trailer, LR: o.LR, Schedule: "linear decay to 0", WeightDecay: o.WeightDecay,
		Betas: [2]float64{o.Beta1, o.Beta2}, Eps: o.Eps, Epochs: o.Epochs, Batch: o.Batch, Seed: o.Seed,
		Examples: len(examples), Steps: steps, FinalLoss: res.EpochLoss[len(res.EpochLoss)-1], Seconds: res.Time.Seconds()}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	a.TrainConfig = string(b)
	res.Adapter = a
	return res, nil
}

// batchGrad sets grad to the mean gradient over the batch's examples and
// returns their mean loss. Each example's gradient goes to its own buffer
// and the buffers are summed in batch order, so workers change nothing.
func batchGrad(m *llama.Model, header, trailer []float64, examples []*llama.PacketExample, batch []int, grad []float64, workers int, hide bool) (float64, error) {
	nh := len(header)
	losses := make([]float64, len(batch))
	grads := make([][]float64, len(batch))
	errs := make([]error, len(batch))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(workers, len(batch)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				g := make([]float64, len(grad))
				ex := *examples[batch[i]]
				ex.HideHeader = hide
				losses[i], errs[i] = m.PacketLoss(header, trailer, &ex, g[:nh], g[nh:])
				grads[i] = g
			}
		}()
	}
	for i := range batch {
		next <- i
	}
	close(next)
	wg.Wait()
	clear(grad)
	var loss float64
	inv := 1 / float64(len(batch))
	for i, g := range grads {
		if errs[i] != nil {
			return 0, fmt.Errorf("train: example %d: %w", batch[i], errs[i])
		}
		loss += losses[i] * inv
		for j, v := range g {
			grad[j] += v * inv
		}
	}
	return loss, nil
}

// adamW is AdamW with bias correction and decoupled weight decay.
type adamW struct {
	m, v []float64
	t    int
	o    *Options
}

func newAdamW(n int, o *Options) *adamW {
	return &adamW{m: make([]float64, n), v: make([]float64, n), o: o}
}

func (a *adamW) step(theta, grad []float64, lr float64) {
	a.t++
	b1, b2 := a.o.Beta1, a.o.Beta2
	c1, c2 := 1-math.Pow(b1, float64(a.t)), 1-math.Pow(b2, float64(a.t))
	for i, g := range grad {
		a.m[i] = b1*a.m[i] + (1-b1)*g
		a.v[i] = b2*a.v[i] + (1-b2)*g*g
		theta[i] -= lr * (a.m[i]/c1/(math.Sqrt(a.v[i]/c2)+a.o.Eps) + a.o.WeightDecay*theta[i])
	}
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

func to32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}
