package codec

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/kvstore/kvstore/format"
)

// Job is one chunk of EncodeParallel or DecodeParallel.
type Job struct {
	Codec format.Codec
	Desc  Desc
	// Src is the raw tensor to encode, or the stored bytes to decode.
	Src []byte
	// Dst is appended to by EncodeParallel, which leaves the result here;
	// DecodeParallel decodes into it, exactly Desc.RawSize() bytes.
	Dst []byte
}

// EncodeParallel encodes every job, one chunk per goroutine on at most
// workers goroutines (GOMAXPROCS when workers <= 0): jobs[i].Dst =
// Encode(jobs[i].Dst, jobs[i].Src, ...). It returns the error of the
// lowest-numbered job that failed, naming it; jobs not yet started when a
// job fails are skipped.
func EncodeParallel(jobs []Job, opts Options, workers int) error {
	return forEach(jobs, workers, func(j *Job) (err error) {
		j.Dst, err = Encode(j.Dst, j.Src, j.Codec, j.Desc, opts)
		return err
	})
}

// DecodeParallel decodes every job into its Dst, as Decode does, one chunk
// per goroutine on at most workers goroutines (GOMAXPROCS when workers <=
// 0). Jobs' destinations must not overlap. It returns the error of the
// lowest-numbered job that failed, naming it.
func DecodeParallel(jobs []Job, workers int) error {
	return forEach(jobs, workers, func(j *Job) error {
		return Decode(j.Dst, j.Src, j.Codec, j.Desc)
	})
}

// forEach runs fn on every job from a shared counter on up to workers
// goroutines and stops handing out jobs after the first failure.
func forEach(jobs []Job, workers int, fn func(*Job) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(jobs))
	errs := make([]error, len(jobs))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(jobs) {
					return
				}
				if errs[i] = fn(&jobs[i]); errs[i] != nil {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("chunk %d: %w", i, err)
		}
	}
	return nil
}
