package main

import (
	"fmt"
	"os"
	"time"

	"github.com/kvstore/kvstore/gpu"
	"github.com/kvstore/kvstore/lab/quality"
)

// runGPUZoom prints the GPU zoom path's table (-gpuzoom): span memory's
// zoom rebuilt through gpu.Prefetcher and the reconstruct kernel, against
// the host path, on single needles. The device is the CUDA one when
// KVSTORE_GPU=1 (an error when there is none), else the CPU device.
func runGPUZoom(cfg quality.NeedleConfig, arena float64, lookahead int) error {
	dev := gpu.CPU()
	if os.Getenv("KVSTORE_GPU") == "1" {
		var err error
		if dev, err = gpu.Open(); err != nil {
			return fmt.Errorf("KVSTORE_GPU=1: %w", err)
		}
	}
	defer dev.Close()
	start := time.Now()
	cfg.Keys = 1
	cfg.Progress = func(i int, nd *quality.Needle, err error) {
		fmt.Fprintf(os.Stderr, "gpu zoom %d/%d (depth %.2f) %v %v\n", i+1, cfg.Needles, nd.Depth, time.Since(start).Round(time.Second), errText(err))
	}
	rows, skipped, err := quality.RunGPUZoom(quality.GPUZoomConfig{NeedleConfig: cfg,
		Zoom: quality.DeviceZoomOptions{Device: dev, ArenaShare: arena, Lookahead: lookahead}})
	if err != nil {
		return err
	}
	info := dev.Info()
	meth := quality.MethodSpan
	if cfg.Retrieval != nil {
		meth = quality.MethodSpanHeads
	}
	fmt.Printf("GPU zoom path: %s's zoom through gpu.Prefetcher and the reconstruct kernel on %s (%s), arena %g of the factor bytes, lookahead %d; %d needles (%d left out: span memory not built)\n\n",
		meth, info.Name, info.Kind, arena, lookahead, cfg.Needles-skipped, skipped)
	fmt.Println("| budget | top-1/byte full / host / device | logits differ | zoom sets differ | zoom KiB/step | moved KiB/step | copied back KiB/step | raw rows KiB/step | hit rate | loads | evictions | skipped | arena KiB |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		ps := r.Prefetch
		fmt.Printf("| %s | %.2f / %.2f / %.2f | %d/%d steps (max %g) | %d/%d | %.1f | %.1f | %.1f | %.1f | %.3f | %d | %d | %d | %.0f |\n",
			budget(r.Budget), r.Full.Top1, r.Host.Top1, r.Device.Top1, r.LogitsDiffer, r.Steps, r.MaxLogitDiff, r.ZoomsDiffer, r.Calls,
			r.ZoomBytesPerStep()/1024, r.MovedBytesPerStep()/1024, float64(r.CopiedBack)/float64(r.Steps)/1024, float64(r.RawBytes)/float64(r.Steps)/1024,
			r.HitRate(), ps.Loads, ps.Evictions, ps.Skipped, float64(r.ArenaBytes)/1024)
	}
	fmt.Println()
	fmt.Fprintf(os.Stderr, "done in %v\n", time.Since(start).Round(time.Second))
	return nil
}
