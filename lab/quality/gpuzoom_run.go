package quality

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/gpu"
	"github.com/kvstore/kvstore/lab/llama"
)

// GPUZoomConfig compares span memory's zoom on the host with the GPU zoom
// path (gpuzoom.go) on needles: the same needles as RunNeedles with the
// same NeedleConfig, span memory at each budget decoded twice from one
// stored memory, once per path. With Retrieval set the method is
// span+heads (its retrieval heads zoom), else span.
type GPUZoomConfig struct {
	NeedleConfig
	// Summaries selects span+sum rather than span.
	Summaries bool
	// Zoom configures the device path.
	Zoom DeviceZoomOptions
}

// GPUZoomRow is one budget over the needles.
type GPUZoomRow struct {
	Budget  float64
	Needles int
	// Full, Host and Device are the needles' scores with the full KV,
	// span memory zoomed on the host, and zoomed through the device.
	Full, Host, Device ZoomScore
	// Steps are the decode steps over the needles (one per recall-line
	// token), Calls the zoom calls (steps x layers).
	Steps, Calls int64
	// LogitsDiffer counts the steps whose device logits are not bit for
	// bit the host's; MaxLogitDiff is the largest |host - device| logit.
	LogitsDiffer int
	MaxLogitDiff float64
	// ZoomsDiffer counts the (step, layer) whose zoom sets differ.
	ZoomsDiffer int
	// HostZoomBytes is the host path's zoomed factor bytes
	// (store.Routing.SpanBytes, K and V); the device path acquired
	// Blocks blocks of FactorBytes bytes and copied CopiedBack bytes of
	// rebuilt rows back.
	HostZoomBytes                   int64
	Blocks, FactorBytes, CopiedBack int64
	// RawBytes are the zoomed unfactored spans' stored rows (raw zoom,
	// read as stored rather than rebuilt).
	RawBytes int64
	// Prefetch sums the prefetchers' counters (Resident and
	// ResidentBytes: at the end of the last needle); ArenaBytes is the
	// last needle's device budget for factor blocks.
	Prefetch   gpu.Stats
	ArenaBytes int
}

// ZoomScore is a method's mean log-prob and top-1 per byte of the needles'
// values and the values recalled whole (NeedleScore over needles).
type ZoomScore struct {
	LogProb, Top1 float64
	Exact         int
}

// HitRate is the share of acquires that found their block resident or on
// its way: Hits / (Hits + Misses).
func (r *GPUZoomRow) HitRate() float64 {
	return float64(r.Prefetch.Hits) / float64(max(1, r.Prefetch.Hits+r.Prefetch.Misses))
}

// ZoomBytesPerStep is the factor bytes the zoom needs per decode step, all
// layers; MovedBytesPerStep the bytes the prefetcher actually copied to
// the device per step (demand loads and prefetches).
func (r *GPUZoomRow) ZoomBytesPerStep() float64 {
	return float64(r.FactorBytes) / float64(max(1, r.Steps))
}

func (r *GPUZoomRow) MovedBytesPerStep() float64 {
	return float64(r.Prefetch.BytesMoved) / float64(max(1, r.Steps))
}

// RunGPUZoom runs the comparison. Needles whose span memory could not be
// built are left out and counted in skipped.
func RunGPUZoom(cfg GPUZoomConfig) (rows []GPUZoomRow, skipped int, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, 0, err
	}
	if len(cfg.Files) == 0 || cfg.Needles < 1 || len(cfg.Budgets) == 0 {
		return nil, 0, fmt.Errorf("%w: quality: gpu zoom: %d files, %d needles, %d budgets", format.ErrInvalidArgument, len(cfg.Files), cfg.Needles, len(cfg.Budgets))
	}
	rows = make([]GPUZoomRow, len(cfg.Budgets))
	for j, f := range cfg.Budgets {
		rows[j].Budget = f
	}
	// RunNeedles's needles.
	skipped, err = cfg.eachNeedle(func(nd *Needle) error {
		if err := cfg.runNeedle(nd, rows); err != nil {
			return fmt.Errorf("gpu zoom: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, skipped, err
	}
	for j := range rows {
		r := &rows[j]
		for _, s := range []*ZoomScore{&r.Full, &r.Host, &r.Device} {
			s.LogProb /= float64(r.Needles)
			s.Top1 /= float64(r.Needles)
		}
	}
	return rows, skipped, nil
}

// runNeedle prefills nd's context, builds its span memory and adds each
// budget's host and device runs to rows (score sums, averaged by
// RunGPUZoom).
func (cfg *GPUZoomConfig) runNeedle(nd *Needle, rows []GPUZoomRow) error {
	cont := nd.Tokens[nd.Context:]
	full, runs, err := compareZoom(&cfg.LongConfig, nd.Tokens[:nd.Context], cont, cfg.Summaries, cfg.Zoom)
	if err != nil {
		return err
	}
	add := func(sum *ZoomScore, logits [][]float32) {
		sc := scoreNeedle(nd, logits)
		sum.LogProb += sc.LogProb
		sum.Top1 += sc.Top1
		if sc.Exact {
			sum.Exact++
		}
	}
	for j, run := range runs {
		r := &rows[j]
		r.Needles++
		add(&r.Full, full)
		add(&r.Host, run.host)
		add(&r.Device, run.device)
		r.Steps += int64(len(cont))
		r.Calls += run.stats.Calls
		r.LogitsDiffer += run.logitsDiffer
		r.MaxLogitDiff = max(r.MaxLogitDiff, run.maxLogitDiff)
		r.ZoomsDiffer += run.zoomsDiffer
		r.HostZoomBytes += run.hostBytes
		r.Blocks += run.stats.Blocks
		r.FactorBytes += run.stats.FactorBytes
		r.CopiedBack += run.stats.CopiedBack
		r.RawBytes += run.stats.RawBytes
		addStats(&r.Prefetch, run.prefetch)
		r.ArenaBytes = run.arena
	}
	return nil
}

// zoomRun is one budget's host and device decodes of a context.
type zoomRun struct {
	host, device [][]float32 // logits per step
	logitsDiffer int         // steps whose logits are not bit for bit equal
	maxLogitDiff float64
	zoomsDiffer  int   // (step, layer) whose zoom sets differ
	zoomed       []int // per (layer, KV head) group, the spans the device path zoomed over every step
	hostBytes    int64 // the host path's zoomed factor bytes
	stats        deviceZoomStats
	prefetch     gpu.Stats
	arena        int
}

// compareZoom prefills ctx with lc.Span.Model, builds its span memory
// from lc.Span's settings and decodes cont teacher-forced with the full
// KV and, at each of lc.Budgets, span memory (lc.zoomMethod) zoomed on the
// host and through the device.
func compareZoom(lc *LongConfig, ctx, cont []int, summaries bool, zoom DeviceZoomOptions) (full [][]float32, runs []zoomRun, err error) {
	m, n := lc.Span.Model, len(ctx)
	pre, err := m.Forward(ctx, 0, nil, llama.ForwardOptions{})
	if err != nil {
		return nil, nil, err
	}
	h := surprisal(pre, n)
	if full, err = decode(m, keepRows(pre.Cache, allTokens(n)), cont, n); err != nil {
		return nil, nil, err
	}
	s, err := newSpanStore(m, pre.Cache, h, &lc.Span)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errSpanBuild, err)
	}
	defer s.close()
	for _, f := range lc.Budgets {
		b := max(1, int(math.Floor(f*float64(n))))
		host, hostSM, err := lc.zoomMethod(s, h, pre.Cache, b, summaries)
		if err != nil {
			return nil, nil, fmt.Errorf("host at %v: %w", f, err)
		}
		hostTrace := traced(hostSM)
		var run zoomRun
		if run.host, err = decode(m, host, cont, n); err != nil {
			return nil, nil, fmt.Errorf("host at %v: %w", f, err)
		}
		dev, devSM, err := lc.zoomMethod(s, h, pre.Cache, b, summaries)
		if err != nil {
			return nil, nil, fmt.Errorf("device at %v: %w", f, err)
		}
		dz, err := newDeviceZoom(s, &devSM.rt, zoom)
		if err != nil {
			return nil, nil, fmt.Errorf("device at %v: %w", f, err)
		}
		devSM.zoomer = dz
		devTrace := traced(devSM)
		if run.device, err = decode(m, dev, cont, n); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("device at %v: %w", f, err), dz.close())
		}
		run.prefetch, run.stats, run.arena = dz.prefetchStats(), dz.stats, dz.arena
		if err := dz.close(); err != nil {
			return nil, nil, fmt.Errorf("device at %v: %w", f, err)
		}
		for k := range run.host {
			if !slices.Equal(run.host[k], run.device[k]) {
				run.logitsDiffer++
			}
			for v := range run.host[k] {
				run.maxLogitDiff = max(run.maxLogitDiff, math.Abs(float64(run.host[k][v])-float64(run.device[k][v])))
			}
		}
		run.zoomsDiffer = zoomsDiffer(hostTrace.calls, devTrace.calls)
		run.zoomed = zoomedSpans(devTrace.calls)
		run.hostBytes = int64(hostSM.stats.bytes)
		runs = append(runs, run)
	}
	return full, runs, nil
}

// zoomsDiffer counts the calls whose layer or zoom sets differ (calls
// present in one trace only count too).
func zoomsDiffer(a, b []zoomCall) int {
	n := max(len(a), len(b)) - min(len(a), len(b))
	for i := range min(len(a), len(b)) {
		if a[i].layer != b[i].layer || !slices.EqualFunc(a[i].spans, b[i].spans, slices.Equal[[]int]) {
			n++
		}
	}
	return n
}

// zoomedSpans is, per (layer, KV head) group, how many spans the calls
// zoomed in all.
func zoomedSpans(calls []zoomCall) []int {
	var out []int
	for _, c := range calls {
		for g, sps := range c.spans {
			gi := c.layer*len(c.spans) + g
			for len(out) <= gi {
				out = append(out, 0)
			}
			out[gi] += len(sps)
		}
	}
	return out
}

// addStats adds b's counters to a; Resident and ResidentBytes are b's.
func addStats(a *gpu.Stats, b gpu.Stats) {
	a.Hits += b.Hits
	a.Misses += b.Misses
	a.Loads += b.Loads
	a.BytesMoved += b.BytesMoved
	a.Evictions += b.Evictions
	a.Skipped += b.Skipped
	a.Resident, a.ResidentBytes = b.Resident, b.ResidentBytes
}
