package gpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/reconstruct"
)

// The device report: figures the device check prints (see
// scripts/device-check.sh). TestDeviceReport runs it on a CUDA device at
// full size when KVSTORE_GPU_REPORT=1; TestDeviceReportCPU runs the same
// code at a small size on the CPU device so that it stays correct in CI:
// both check the copies and kernels bit for bit against the CPU reference,
// the device fields against the kind of device, and every figure for a
// positive, finite rate.

// reportSize scales the report.
type reportSize struct {
	copyBytes int // per host<->device copy
	d2dBytes  int // per device-to-device copy
	reps      int
	heads     int // Llama-3.1-8B: 8 KV heads of 128 dims
	headDim   int
	spans     int // spans per head
	spanRows  int
	rank      int
	blockSize int // paged layout
}

var (
	fullReport  = reportSize{copyBytes: 256 << 20, d2dBytes: 1 << 30, reps: 8, heads: 8, headDim: 128, spans: 256, spanRows: 128, rank: 32, blockSize: 16}
	smallReport = reportSize{copyBytes: 1 << 20, d2dBytes: 1 << 20, reps: 2, heads: 2, headDim: 16, spans: 4, spanRows: 8, rank: 4, blockSize: 4}
)

func TestDeviceReport(t *testing.T) {
	testenv.Need(t, testenv.GPU, os.Getenv("KVSTORE_GPU_REPORT") == "1",
		"set KVSTORE_GPU_REPORT=1 to measure the GPU (scripts/device-check.sh does)")
	deviceReport(t, openCUDA(t), fullReport)
}

func TestDeviceReportCPU(t *testing.T) { deviceReport(t, CPU(), smallReport) }

func deviceReport(t *testing.T, dev Device, sz reportSize) {
	info := dev.Info()
	report(t, "device: %s (%s), compute capability %d.%d, %d SMs, %.1f GiB, driver %d",
		info.Name, info.Kind, info.ComputeCapability/10, info.ComputeCapability%10, info.Multiprocessors,
		float64(info.MemoryBytes)/(1<<30), info.DriverVersion)
	checkInfo(t, info)
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pinned := measureH2D(t, dev, s, sz, true)
	pageable := measureH2D(t, dev, s, sz, false)
	report(t, "H2D %d MiB x %d: pinned %.2f GB/s, pageable %.2f GB/s (pinned/pageable %.2fx)",
		sz.copyBytes>>20, sz.reps, pinned, pageable, pinned/pageable)
	checkRate(t, "H2D pinned", pinned)
	checkRate(t, "H2D pageable", pageable)
	d2d := measureD2D(t, dev, s, sz)
	checkRate(t, "D2D", d2d)
	report(t, "D2D copy %d MiB x %d: %.2f GB/s copied = %.2f GB/s of memory traffic (read + write)",
		sz.d2dBytes>>20, sz.reps, d2d, 2*d2d)
	for _, kind := range layoutKind {
		for _, dt := range []format.DType{format.DTypeBF16, format.DTypeF32} {
			gbs, out := measureReconstruct(t, dev, s, sz, kind, dt)
			report(t, "reconstruct+RoPE %-9v f32 factors -> %-4v rank %d: %.2f GB/s traffic (%.0f%% of D2D traffic), %.2f GB/s written",
				kind, dt, sz.rank, gbs, 100*gbs/(2*d2d), out)
			what := fmt.Sprintf("reconstruct %v %v", kind, dt)
			checkRate(t, what+" traffic", gbs)
			checkRate(t, what+" written", out)
			if out > gbs {
				t.Errorf("%s: %.3f GB/s written, more than the %.3f GB/s of traffic that includes it", what, out, gbs)
			}
		}
	}
	for _, kind := range layoutKind {
		gbs := measureShift(t, dev, s, sz, kind)
		report(t, "shift+scatter     %-9v bf16 -> bf16: %.2f GB/s traffic (%.0f%% of D2D traffic)", kind, gbs, 100*gbs/(2*d2d))
		checkRate(t, fmt.Sprintf("shift %v", kind), gbs)
	}
}

// checkInfo checks that the device fields of the report agree with the
// kind of device: the CPU device has no compute capability, memory or
// driver and counts GOMAXPROCS as its multiprocessors; a CUDA device has
// all four.
func checkInfo(t *testing.T, info Info) {
	t.Helper()
	switch info.Kind {
	case KindCPU:
		if info.Name == "" || info.ComputeCapability != 0 || info.MemoryBytes != 0 || info.DriverVersion != 0 ||
			info.Multiprocessors != runtime.GOMAXPROCS(0) {
			t.Errorf("CPU device info %+v: want a name, GOMAXPROCS (%d) multiprocessors and no compute capability, memory or driver",
				info, runtime.GOMAXPROCS(0))
		}
	case KindCUDA:
		if info.Name == "" || info.ComputeCapability < 10 || info.MemoryBytes <= 0 || info.Multiprocessors <= 0 || info.DriverVersion <= 0 {
			t.Errorf("CUDA device info %+v: want a name, a compute capability, memory, multiprocessors and a driver version", info)
		}
	default:
		t.Errorf("device info %+v: unknown kind", info)
	}
}

// checkRate fails t unless a measured rate is positive and finite.
func checkRate(t *testing.T, what string, gbs float64) {
	t.Helper()
	if !(gbs > 0) || math.IsInf(gbs, 0) {
		t.Errorf("%s: %v GB/s, want a positive finite rate", what, gbs)
	}
}

func report(t *testing.T, f string, a ...any) {
	t.Helper()
	fmt.Printf("REPORT "+f+"\n", a...)
}

// timeStream runs enqueue reps times and returns the seconds per rep,
// measured by events on the stream (wall clock on the CPU device too).
func timeStream(t *testing.T, dev Device, s Stream, reps int, enqueue func() error) float64 {
	t.Helper()
	if err := enqueue(); err != nil { // warm up (JIT, page faults)
		t.Fatal(err)
	}
	e0, _ := dev.NewEvent()
	e1, _ := dev.NewEvent()
	defer e0.Close()
	defer e1.Close()
	start := time.Now()
	if err := s.Record(e0); err != nil {
		t.Fatal(err)
	}
	for range reps {
		if err := enqueue(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Record(e1); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	d, err := e1.Elapsed(e0)
	if err != nil || d <= 0 {
		d = wall
	}
	return d.Seconds() / float64(reps)
}

func measureH2D(t *testing.T, dev Device, s Stream, sz reportSize, pinned bool) float64 {
	dst, err := dev.Alloc(sz.copyBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free(dst)
	var src []byte
	if pinned {
		h, err := dev.AllocHost(sz.copyBytes)
		if err != nil {
			t.Fatal(err)
		}
		defer dev.FreeHost(h)
		src = h.Bytes()
	} else {
		src = make([]byte, sz.copyBytes)
	}
	for i := range src {
		src[i] = byte(i)
	}
	// Pageable copies complete inside CopyHtoD on CUDA, so wall time is
	// what a caller waits; for pinned copies events and wall agree.
	start := time.Now()
	sec := timeStream(t, dev, s, sz.reps, func() error { return s.CopyHtoD(dst, src) })
	if !pinned {
		sec = time.Since(start).Seconds() / float64(sz.reps+1)
	}
	got := download(t, s, dst)
	if !bytes.Equal(got[:4096], src[:4096]) || !bytes.Equal(got[len(got)-4096:], src[len(src)-4096:]) {
		t.Fatal("H2D copy corrupted the data")
	}
	return float64(sz.copyBytes) / sec / 1e9
}

func measureD2D(t *testing.T, dev Device, s Stream, sz reportSize) float64 {
	a, err := dev.Alloc(sz.d2dBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free(a)
	b, err := dev.Alloc(sz.d2dBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free(b)
	s.Memset(a, 3)
	sec := timeStream(t, dev, s, sz.reps, func() error { return s.CopyDtoD(b, a) })
	return float64(sz.d2dBytes) / sec / 1e9
}

// reconScene is a large reconstruction: heads x spans jobs of distinct
// factor blocks, keys rotated, all in one launch.
type reconScene struct {
	launch   ReconstructLaunch
	targets  []Target
	factors  []*reconstruct.Factors
	rope     *reconstruct.RoPE
	traffic  int // bytes read and written by one launch
	outBytes int
}

func buildReconScene(t testing.TB, dev Device, s Stream, sz reportSize, kind LayoutKind, dt format.DType) *reconScene {
	rng := rand.New(rand.NewPCG(17, uint64(kind)))
	cfg := format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
		Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}
	sc := &reconScene{rope: mustRoPE(t, cfg, sz.headDim)}
	lay, table := testLayout(rng, kind, dt, sz.heads, sz.headDim, sz.spans*sz.spanRows)
	if kind == LayoutPagedNHD {
		lay.BlockSize = sz.blockSize
		lay.Tokens = sz.spans * sz.spanRows
		lay.Blocks = lay.Tokens / sz.blockSize
		table = make([]int32, lay.Blocks)
		for i, p := range rng.Perm(lay.Blocks) {
			table[i] = int32(p)
		}
	}
	var blob []byte
	var spans []*Span
	// Distinct factors for every (span, head) would take long to make on
	// the host; 64 distinct blocks, each placed many times, still give
	// every job its own memory to read.
	var encs [][]byte
	for range min(64, sz.spans*sz.heads) {
		f, enc := randFactors(t, rng, sz.spanRows, sz.headDim, sz.rank, format.DTypeF32)
		sc.factors = append(sc.factors, f)
		encs = append(encs, enc)
	}
	for sp := range sz.spans {
		for h := range sz.heads {
			n := (sp*sz.heads + h) % len(encs)
			off := len(blob)
			blob = append(blob, encs[n]...)
			blob = append(blob, make([]byte, alignUp(len(blob), ArenaAlign)-len(blob))...)
			sc.targets = append(sc.targets, Target{Head: h, Token: sp * sz.spanRows, Rotate: true})
			spans = append(spans, &Span{Layout: reconstruct.FactorLayout{Rows: sz.spanRows, Cols: sz.headDim, Rank: sz.rank, DType: format.DTypeF32},
				Buffer: Buffer{off: off, n: len(encs[n])}})
			sc.traffic += len(encs[n])
		}
	}
	factors := upload(t, dev, s, blob)
	for _, sp := range spans {
		sp.Buffer.mem = factors.mem
	}
	r := &Reconstructor{rope: sc.rope}
	aux, jobs, maxRows, maxRank, err := r.encode(lay, sc.targets, spans)
	if err != nil {
		t.Fatal(err)
	}
	auxBuf := upload(t, dev, s, aux)
	jobBuf, _ := auxBuf.Sub(0, jobs*JobSize)
	dst, err := dev.Alloc(lay.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	sc.outBytes = sz.heads * sz.spans * sz.spanRows * sz.headDim * dt.Size()
	sc.traffic += sc.outBytes
	sc.launch = ReconstructLaunch{Layout: lay, Dst: dst, Table: upload(t, dev, s, EncodeTable(table)),
		Factors: factors, Aux: auxBuf, Jobs: jobBuf, NumJobs: jobs, MaxRows: maxRows, MaxRank: maxRank,
		Rotary: sc.rope.Rotary(), Style: cfg.Style}
	return sc
}

func measureReconstruct(t *testing.T, dev Device, s Stream, sz reportSize, kind LayoutKind, dt format.DType) (traffic, written float64) {
	sc := buildReconScene(t, dev, s, sz, kind, dt)
	sec := timeStream(t, dev, s, sz.reps, func() error { return s.Reconstruct(&sc.launch) })
	// Check a sample of jobs against the CPU reference.
	got := download(t, s, sc.launch.Dst)
	table := decodeTable(download(t, s, sc.launch.Table))
	lay := &sc.launch.Layout
	rb := sz.headDim * dt.Size()
	for _, j := range []int{0, 1, len(sc.targets) / 2, len(sc.targets) - 1} {
		tg := sc.targets[j]
		f := sc.factors[j%len(sc.factors)]
		pos := make([]int64, sz.spanRows)
		for i := range pos {
			pos[i] = int64(tg.Token + i)
		}
		want := make([]byte, sz.spanRows*rb)
		if err := reconstruct.ReconstructBytes(want, dt, f, nil, sc.rope, pos); err != nil {
			t.Fatal(err)
		}
		for r := range sz.spanRows {
			at, _ := lay.Row(tg.Head, tg.Token+r, table)
			if !bytes.Equal(got[at*dt.Size():at*dt.Size()+rb], want[r*rb:(r+1)*rb]) {
				t.Fatalf("reconstruct %v %v: job %d row %d differs from the CPU reference", kind, dt, j, r)
			}
		}
	}
	report(t, "  checked 4 of %d jobs bit for bit against reconstruct.ReconstructBytes", len(sc.targets))
	return float64(sc.traffic) / sec / 1e9, float64(sc.outBytes) / sec / 1e9
}

func measureShift(t *testing.T, dev Device, s Stream, sz reportSize, kind LayoutKind) float64 {
	rng := rand.New(rand.NewPCG(23, uint64(kind)))
	dt := format.DTypeBF16
	tokens := sz.spans * sz.spanRows
	cfg := format.RoPE{Style: format.RoPERotateHalf, Theta: 500000}
	rope := mustRoPE(t, cfg, sz.headDim)
	lay, table := testLayout(rng, kind, dt, sz.heads, sz.headDim, tokens)
	src := packetLayer(rng, dt, sz.heads*tokens*sz.headDim)
	l := ShiftLaunch{Layout: lay, Table: upload(t, dev, s, EncodeTable(table)), Src: upload(t, dev, s, src), SrcDType: dt,
		Tokens: tokens, CosSin: upload(t, dev, s, appendF32(nil, ShiftTable(rope, 1234))), Rotary: rope.Rotary(), Style: cfg.Style}
	var err error
	if l.Dst, err = dev.Alloc(lay.Bytes()); err != nil {
		t.Fatal(err)
	}
	defer dev.Free(l.Dst)
	sec := timeStream(t, dev, s, sz.reps, func() error { return s.Shift(&l) })
	want := make([]byte, len(src))
	if err := reconstruct.Shift(want, src, dt, rope, sz.heads, tokens, 1234); err != nil {
		t.Fatal(err)
	}
	got := download(t, s, l.Dst)
	rb := tokens * sz.headDim * dt.Size()
	img := bytes.Clone(got)
	for h := range sz.heads {
		placeRows(t, img, &lay, table, h, 0, want[h*rb:(h+1)*rb])
	}
	if !bytes.Equal(got, img) {
		t.Fatalf("shift %v: %s", kind, firstDiff(&lay, got, img))
	}
	report(t, "  checked all %d shifted elements bit for bit against reconstruct.Shift", len(src)/2)
	return float64(2*len(src)) / sec / 1e9
}
