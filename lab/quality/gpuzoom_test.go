package quality

import (
	"fmt"
	"os"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/gpu"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
)

// zoomDevice is the device of the GPU zoom path's tests: the CUDA device
// when KVSTORE_GPU=1 or KVSTORE_REQUIRE=gpu (a missing one fails the test),
// else the CPU device.
func zoomDevice(t testing.TB) gpu.Device {
	t.Helper()
	dev := gpu.CPU()
	if os.Getenv("KVSTORE_GPU") == "1" || testenv.Required(testenv.GPU) {
		var err error
		if dev, err = gpu.Open(); err != nil {
			t.Fatalf("a CUDA device is required (KVSTORE_GPU=1 or KVSTORE_REQUIRE=gpu): %v", err)
		}
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Error(err)
		}
	})
	return dev
}

// TestGPUZoomMatchesHost: span memory decoded with its zoom rebuilt
// through gpu.Prefetcher and the reconstruct kernel on a device zooms the
// same spans at every step and layer as the host path and gives the same
// logits bit for bit (the f32 kernel does reconstruct's float32 operations
// in its order: no tolerance), on gocode-2k needles in 512-byte windows
// (TestLongCtxNeedle's). The device acquires exactly the factor bytes the
// host path counts, every acquire is a hit or a miss, and a tight arena
// evicts and misses without changing a logit, with f32 and bf16 factors. Retrieval through span
// memory holds: at 25% the device path's top-1 per byte is at least 0.3
// and its log-prob above -3 (0.57 and -2.10 measured; full KV 0.48).
func TestGPUZoomMatchesHost(t *testing.T) {
	m, files := longCtxOrSkip(t, 512)
	dev := zoomDevice(t)
	t.Logf("device: %s (%s)", dev.Info().Name, dev.Info().Kind)
	for _, tc := range []struct {
		name    string
		budgets []float64
		needles int
		factors format.DType
		zoom    DeviceZoomOptions
		tight   bool // the arena at its floor: evictions and misses expected
	}{
		{"arena half, lookahead 2", []float64{0.10, 0.25}, 3, format.DTypeF32, DeviceZoomOptions{ArenaShare: 0.5, Lookahead: 2}, false},
		{"arena at its floor, bf16 factors", []float64{0.25}, 1, format.DTypeBF16, DeviceZoomOptions{ArenaShare: 1e-6}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.zoom.Device = dev
			rows, skipped, err := RunGPUZoom(GPUZoomConfig{
				NeedleConfig: NeedleConfig{LongConfig: LongConfig{Model: m, Budgets: tc.budgets, Span: Config{FactorDType: tc.factors}},
					Files: files, Window: 512, Needles: tc.needles, Keys: 1, Seed: 1},
				Zoom: tc.zoom})
			if err != nil {
				t.Fatal(err)
			}
			if skipped > 0 {
				t.Errorf("%d of %d needles left out: span memory not built", skipped, tc.needles)
			}
			for _, r := range rows {
				ps := r.Prefetch
				t.Logf("%.2f: top-1 full %.2f host %.2f device %.2f, log-prob %.2f / %.2f / %.2f; %d steps, %d blocks, zoom %.0f B/step, moved %.0f B/step, hit rate %.3f (%d hits, %d misses, %d loads, %d evictions, %d skipped), arena %d B",
					r.Budget, r.Full.Top1, r.Host.Top1, r.Device.Top1, r.Full.LogProb, r.Host.LogProb, r.Device.LogProb,
					r.Steps, r.Blocks, r.ZoomBytesPerStep(), r.MovedBytesPerStep(), r.HitRate(), ps.Hits, ps.Misses, ps.Loads, ps.Evictions, ps.Skipped, r.ArenaBytes)
				if r.LogitsDiffer != 0 || r.ZoomsDiffer != 0 {
					t.Errorf("%v: %d of %d steps' logits differ (max |diff| %g), %d of %d zoom sets differ", r.Budget, r.LogitsDiffer, r.Steps, r.MaxLogitDiff, r.ZoomsDiffer, r.Calls)
				}
				if r.Host != r.Device {
					t.Errorf("%v: scores differ: host %+v, device %+v", r.Budget, r.Host, r.Device)
				}
				if r.Blocks == 0 || r.FactorBytes != r.HostZoomBytes || r.CopiedBack == 0 {
					t.Errorf("%v: %d blocks of %d factor bytes acquired, %d copied back; the host path zoomed %d bytes", r.Budget, r.Blocks, r.FactorBytes, r.CopiedBack, r.HostZoomBytes)
				}
				if ps.Hits+ps.Misses != r.Blocks || ps.Misses > ps.Loads {
					t.Errorf("%v: %d hits + %d misses for %d blocks, %d loads", r.Budget, ps.Hits, ps.Misses, r.Blocks, ps.Loads)
				}
				if tc.tight && (ps.Evictions == 0 || ps.Misses == 0) {
					t.Errorf("%v: arena of %d bytes at its floor: %d evictions, %d misses; want some of each", r.Budget, r.ArenaBytes, ps.Evictions, ps.Misses)
				}
				if r.Budget == 0.25 && !(r.Device.Top1 >= 0.3 && r.Device.LogProb > -3) {
					t.Errorf("%v: device path's top-1 per byte %.2f, log-prob %.2f: want >= 0.3 and above -3 (chance %.2f)", r.Budget, r.Device.Top1, r.Device.LogProb, Chance)
				}
			}
		})
	}
}

// TestGPUZoomRandomModel is TestGPUZoomMatchesHost without files: a
// random model with Llama's 128-dim heads and llama3 RoPE scaling (two
// layers of two KV heads), a sampled context of 256 tokens, 8 decoded,
// f32 and bf16 factors, an arena at its floor. It needs no model file and
// no Go toolchain, so a device check can run it where only the test binary
// is (KVSTORE_GPU=1 on a GPU machine).
func TestGPUZoomRandomModel(t *testing.T) {
	cfg := RandomHD128
	cfg.Dim, cfg.Hidden, cfg.Vocab = 256, 512, 256
	m, err := llama.Random(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	dev := zoomDevice(t)
	const n, steps = 256, 8
	toks, err := sample(m, 0, n+steps, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, dt := range []format.DType{format.DTypeF32, format.DTypeBF16} {
		t.Run(dt.String(), func(t *testing.T) {
			span := Config{Name: "random", Model: m, Context: n, Continuation: steps, FactorDType: dt}
			span.ensureDefaults()
			lc := LongConfig{Model: m, Budgets: []float64{0.25, 0.5}, Span: span}
			_, runs, err := compareZoom(&lc, toks[:n], toks[n:], false, DeviceZoomOptions{Device: dev, ArenaShare: 1e-6, Lookahead: 1})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range runs {
				ps := r.prefetch
				t.Logf("budget %d: %d blocks, %d B acquired, %d hits, %d misses, %d evictions, arena %d B", i, r.stats.Blocks, r.stats.FactorBytes, ps.Hits, ps.Misses, ps.Evictions, r.arena)
				if r.logitsDiffer != 0 || r.zoomsDiffer != 0 {
					t.Errorf("budget %d: %d of %d steps' logits differ (max |diff| %g), %d of %d zoom sets differ", i, r.logitsDiffer, steps, r.maxLogitDiff, r.zoomsDiffer, r.stats.Calls)
				}
				if r.stats.Blocks == 0 || r.stats.FactorBytes != r.hostBytes || ps.Hits+ps.Misses != r.stats.Blocks {
					t.Errorf("budget %d: %d blocks of %d bytes (host path %d), %d hits + %d misses", i, r.stats.Blocks, r.stats.FactorBytes, r.hostBytes, ps.Hits, ps.Misses)
				}
			}
		})
	}
}

// TestGPUZoomHeads: span+heads' zoom through the GPU path (the CPU
// device in CI) for a 512-byte needle with the reported memory at 10% and
// 25%, an arena at its floor: the same zoom sets as the host path at every
// step and layer and the same logits bit for bit; zooms on the retrieval
// heads only; factored spans rebuilt on the device (every acquire a hit or
// a miss), unfactored ones read as stored, their bytes together the host
// path's.
func TestGPUZoomHeads(t *testing.T) {
	m, nd := testNeedle(t)
	span, retrieval := reportedHeads(m)
	lc := LongConfig{Model: m, Budgets: []float64{0.10, 0.25}, Span: span, Retrieval: retrieval, ZoomTau: 0.02}
	if err := lc.defaults(); err != nil {
		t.Fatal(err)
	}
	_, runs, err := compareZoom(&lc, nd.Tokens[:nd.Context], nd.Tokens[nd.Context:], false, DeviceZoomOptions{Device: zoomDevice(t), ArenaShare: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		ps := r.prefetch
		t.Logf("budget %v: zoomed spans per group %v, %d blocks (%d B), %d raw spans (%d B), host %d B, %d hits, %d misses, %d evictions",
			lc.Budgets[i], r.zoomed, r.stats.Blocks, r.stats.FactorBytes, r.stats.RawSpans, r.stats.RawBytes, r.hostBytes, ps.Hits, ps.Misses, ps.Evictions)
		if r.logitsDiffer != 0 || r.zoomsDiffer != 0 {
			t.Errorf("budget %v: %d steps' logits differ (max |diff| %g), %d of %d zoom sets differ", lc.Budgets[i], r.logitsDiffer, r.maxLogitDiff, r.zoomsDiffer, r.stats.Calls)
		}
		zoomed := 0
		for gi, z := range r.zoomed {
			if z > 0 && !retrieval[gi] {
				t.Errorf("budget %v: streaming group %d zoomed %d spans", lc.Budgets[i], gi, z)
			}
			zoomed += z
		}
		if zoomed == 0 || r.stats.Blocks == 0 || r.stats.FactorBytes+r.stats.RawBytes != r.hostBytes || ps.Hits+ps.Misses != r.stats.Blocks {
			t.Errorf("budget %v: %d spans zoomed, %d blocks of %d bytes and %d raw bytes (host path %d), %d hits + %d misses",
				lc.Budgets[i], zoomed, r.stats.Blocks, r.stats.FactorBytes, r.stats.RawBytes, r.hostBytes, ps.Hits, ps.Misses)
		}
	}
}

// BenchmarkGPUZoom measures the GPU zoom path's traffic on
// TestGPUZoomMatchesHost's needles (3 gocode-2k needles in 512-byte
// windows, span memory at 25%), per device arena (a share of the context's
// factor bytes) and lookahead (spans per KV head prefetched beyond the
// zoomed ones): zoom-B/step, the factor bytes the zoom acquires per decode
// step (all layers); moved-B/step, what the prefetcher copied to the device
// per step; copied-back-B/step, the rebuilt rows copied to the host;
// hit-rate, Prefetcher.Stats() hits over acquires. ns/op is one run of
// the needles (prefill, full-KV, host and device decodes): no speed
// figure. It fails if the device path's logits differ from the host's.
func BenchmarkGPUZoom(b *testing.B) {
	m, files := longCtxOrSkip(b, 512)
	dev := zoomDevice(b)
	for _, c := range []struct {
		arena     float64
		lookahead int
	}{{0.5, 0}, {0.5, 2}, {1, 0}, {1, 2}} {
		b.Run(fmt.Sprintf("arena-%g-lookahead-%d", c.arena, c.lookahead), func(b *testing.B) {
			var r GPUZoomRow
			for b.Loop() {
				rows, _, err := RunGPUZoom(GPUZoomConfig{
					NeedleConfig: NeedleConfig{LongConfig: LongConfig{Model: m, Budgets: []float64{0.25}},
						Files: files, Window: 512, Needles: 3, Keys: 1, Seed: 1},
					Zoom: DeviceZoomOptions{Device: dev, ArenaShare: c.arena, Lookahead: c.lookahead}})
				if err != nil {
					b.Fatal(err)
				}
				r = rows[0]
			}
			if r.LogitsDiffer != 0 || r.ZoomsDiffer != 0 {
				b.Fatalf("%d steps' logits and %d zoom sets differ from the host path's", r.LogitsDiffer, r.ZoomsDiffer)
			}
			b.ReportMetric(r.ZoomBytesPerStep(), "zoom-B/step")
			b.ReportMetric(r.MovedBytesPerStep(), "moved-B/step")
			b.ReportMetric(float64(r.CopiedBack)/float64(r.Steps), "copied-back-B/step")
			b.ReportMetric(r.HitRate(), "hit-rate")
		})
	}
}
