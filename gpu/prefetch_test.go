package gpu

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
)

func spanKey(i int) SpanKey {
	k := SpanKey{Layer: int32(i / 8), Head: int32(i % 4), Span: int32(i), Kind: format.ChunkK}
	k.Context[0] = 0xc7
	return k
}

// blockSource holds n spans of factors, each exactly one arena block (so
// budgets count spans), returning the source and the block size.
func blockSource(t *testing.T, n int) (*memSource, int) {
	src := newMemSource()
	rng := rand.New(rand.NewPCG(9, 9))
	size := 0
	for i := range n {
		_, enc := randFactors(t, rng, 6, 8, 2, format.DTypeF32) // 16+4*(12+2+16) = 136 bytes
		src.put(spanKey(i), enc)
		size = len(enc)
	}
	return src, size
}

func newTestPrefetcher(t *testing.T, src Source, spans, readers int) *Prefetcher {
	t.Helper()
	p, err := NewPrefetcher(CPU(), src, PrefetchOptions{Budget: spans * ArenaAlign, Staging: 16 << 10, Readers: readers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func TestPrefetchOrdersByScore(t *testing.T) {
	const n = 20
	src, _ := blockSource(t, n)
	p := newTestPrefetcher(t, src, n, 1)
	rng := rand.New(rand.NewPCG(5, 6))
	var reqs []Request
	score := map[SpanKey]float32{}
	for i := range n {
		s := float32(rng.Float64())
		reqs = append(reqs, Request{Key: spanKey(i), Score: s})
		score[spanKey(i)] = s
	}
	reqs = append(reqs, Request{Key: spanKey(3), Score: 2}) // a duplicate counts with its higher score
	score[spanKey(3)] = 2
	if err := p.Prefetch(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}
	order := src.readOrder()
	if len(order) != n {
		t.Fatalf("%d reads for %d spans", len(order), n)
	}
	if !slices.IsSortedFunc(order, func(a, b SpanKey) int { return -cmpF32(score[a], score[b]) }) {
		t.Fatalf("reads not in descending score order: %v", order)
	}
	st := p.Stats()
	if st.Loads != n || st.Resident != n || st.Skipped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func cmpF32(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestPrefetchBudgetEvictsLowest(t *testing.T) {
	src, size := blockSource(t, 8)
	p := newTestPrefetcher(t, src, 3, 1)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.Prefetch(ctx, []Request{{spanKey(0), 1}, {spanKey(1), 2}, {spanKey(2), 3}}))
	must(p.Prefetch(ctx, []Request{{spanKey(3), 5}}))   // evicts span 0 (score 1)
	must(p.Prefetch(ctx, []Request{{spanKey(4), 0.5}})) // lower than everything resident: skipped
	st := p.Stats()
	if st.Evictions != 1 || st.Skipped != 1 || st.Resident != 3 || st.Loads != 4 || st.BytesMoved != int64(4*size) {
		t.Fatalf("stats %+v", st)
	}
	// Span 1 is still there (a hit, now pinned); span 0 was evicted (a
	// miss, which evicts the lowest-scored idle span: span 2 at score 3).
	s1, err := p.Acquire(ctx, spanKey(1))
	must(err)
	s0, err := p.Acquire(ctx, spanKey(0))
	must(err)
	st = p.Stats()
	if st.Hits != 1 || st.Misses != 1 || st.Evictions != 2 {
		t.Fatalf("after acquires: %+v", st)
	}
	// Both are pinned: requests scored above everything can evict only
	// the one idle span left (span 3, score 5), and then nothing.
	must(p.Prefetch(ctx, []Request{{spanKey(5), 9}, {spanKey(6), 8}}))
	if st = p.Stats(); st.Skipped != 2 || st.Evictions != 3 {
		t.Fatalf("pinned spans were evicted or nothing was skipped: %+v", st)
	}
	must(p.Release(s0, nil))
	must(p.Release(s1, nil))
	must(p.Prefetch(ctx, []Request{{spanKey(6), 8}})) // evicts span 0, demand-loaded, lowest score
	if st = p.Stats(); st.Evictions != 4 || st.Resident != 3 {
		t.Fatalf("released spans were not evictable: %+v", st)
	}
	if s, err := p.Acquire(ctx, spanKey(1)); err != nil || p.Stats().Hits != 2 {
		t.Fatalf("span 1 (score 2) was evicted before the demand-loaded span 0: %v, %+v", err, p.Stats())
	} else {
		p.Release(s, nil)
	}
}

// TestPrefetchEvictsTiesInKeyOrder: among idle spans of equal score the
// prefetcher evicts in SpanKey order, whatever order they were loaded in,
// so the same requests evict the same spans in every run.
func TestPrefetchEvictsTiesInKeyOrder(t *testing.T) {
	// spanKey(i) is layer 0, head i%4, span i: key order 0, 4, 1, 5, 2, ...
	want := []SpanKey{spanKey(0), spanKey(4), spanKey(1), spanKey(5)}
	for run := range 10 {
		src, _ := blockSource(t, 12)
		p := newTestPrefetcher(t, src, 8, 1)
		ctx := context.Background()
		var reqs []Request
		for _, i := range rand.New(rand.NewPCG(uint64(run), 3)).Perm(8) {
			reqs = append(reqs, Request{Key: spanKey(i), Score: 1})
		}
		if err := p.Prefetch(ctx, reqs); err != nil {
			t.Fatal(err)
		}
		var evicted []SpanKey
		for i := 8; i < 12; i++ {
			before := residentKeys(p)
			if err := p.Prefetch(ctx, []Request{{spanKey(i), 2}}); err != nil {
				t.Fatal(err)
			}
			after := residentKeys(p)
			for _, k := range before {
				if !slices.Contains(after, k) {
					evicted = append(evicted, k)
				}
			}
		}
		if !slices.Equal(evicted, want) {
			t.Fatalf("run %d (load order %v): evicted %v, want %v", run, reqs, evicted, want)
		}
	}
}

// residentKeys lists p's spans on the device or on their way.
func residentKeys(p *Prefetcher) []SpanKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	var keys []SpanKey
	for k := range p.entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	return keys
}

// TestEvictionWaitsForReaders: memory of a span released after pending
// work on a stream is not overwritten until that work is done.
func TestEvictionWaitsForReaders(t *testing.T) {
	src, _ := blockSource(t, 2)
	p := newTestPrefetcher(t, src, 1, 1)
	ctx := context.Background()
	dev := p.dev
	compute, _ := dev.NewStream()
	defer compute.Close()
	gate := make(chan struct{})
	defer func() {
		select {
		case <-gate:
		default:
			close(gate) // let the stream finish if the test failed early
		}
	}()
	s0, err := p.Acquire(ctx, spanKey(0))
	if err != nil {
		t.Fatal(err)
	}
	compute.(*cpuStream).work(func() error { <-gate; return nil }) // a "kernel" still reading span 0
	if err := p.Release(s0, compute); err != nil {
		t.Fatal(err)
	}
	s1, err := p.Acquire(ctx, spanKey(1)) // evicts span 0, copies into its memory
	if err != nil {
		t.Fatal(err)
	}
	if s1.Buffer.Offset() != s0.Buffer.Offset() {
		t.Fatalf("span 1 at %d did not reuse span 0's memory at %d", s1.Buffer.Offset(), s0.Buffer.Offset())
	}
	copied := make(chan struct{})
	go func() { s1.Ready.Synchronize(); close(copied) }()
	select {
	case <-copied:
		t.Fatal("span 1 was copied over span 0 while a reader of span 0 was pending")
	case <-time.After(20 * time.Millisecond):
	}
	close(gate)
	<-copied
	if err := p.Release(s1, nil); err != nil {
		t.Fatal(err)
	}
}

func TestPrefetchCancel(t *testing.T) {
	src, _ := blockSource(t, 4)
	started := make(chan struct{}, 4)
	src.beforeRead = func(ctx context.Context, _ SpanKey) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	p := newTestPrefetcher(t, src, 4, 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- p.Prefetch(ctx, []Request{{spanKey(0), 1}, {spanKey(1), 1}, {spanKey(2), 1}, {spanKey(3), 1}})
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Prefetch after cancel: %v", err)
	}
	if st := p.Stats(); st.Resident != 0 || st.Loads != 0 {
		t.Fatalf("cancelled loads left spans behind: %+v", st)
	}
	if p.Arena().InUse() != 0 {
		t.Fatalf("cancelled loads leaked %d arena bytes", p.Arena().InUse())
	}
}

func TestPrefetchCorruptSource(t *testing.T) {
	src, _ := blockSource(t, 2)
	src.put(spanKey(1), []byte("KVSF but not really factors"))
	p := newTestPrefetcher(t, src, 4, 1)
	ctx := context.Background()
	if err := p.Prefetch(ctx, []Request{{spanKey(0), 1}, {spanKey(1), 2}}); !errors.Is(err, ErrCorruption) || !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("Prefetch of corrupt bytes: %v", err)
	}
	if _, err := p.Acquire(ctx, spanKey(1)); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Acquire of corrupt bytes: %v", err)
	}
	if _, err := p.Acquire(ctx, spanKey(99)); err == nil {
		t.Fatal("Acquire of a key the source lacks succeeded")
	}
	s, err := p.Acquire(ctx, spanKey(0))
	if err != nil {
		t.Fatalf("the good span is gone: %v", err)
	}
	p.Release(s, nil)
	if st := p.Stats(); st.Resident != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPrefetchConcurrent runs prefetches and acquires from several
// goroutines over a budget smaller than the working set; the race detector
// and the arena's accounting check the locking.
func TestPrefetchConcurrent(t *testing.T) {
	const n = 24
	src, _ := blockSource(t, n)
	p := newTestPrefetcher(t, src, 6, 3)
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 30 {
				var reqs []Request
				for range 5 {
					reqs = append(reqs, Request{Key: spanKey(rng.IntN(n)), Score: float32(rng.Float64())})
				}
				if err := p.Prefetch(ctx, reqs); err != nil {
					t.Error(err)
					return
				}
				s, err := p.Acquire(ctx, spanKey(rng.IntN(n)))
				if errors.Is(err, ErrBudget) {
					continue // every block pinned by the other goroutines
				}
				if err != nil {
					t.Error(err)
					return
				}
				p.Release(s, nil)
			}
		})
	}
	wg.Wait()
	st := p.Stats()
	if st.Resident > 6 || int(st.ResidentBytes) != p.Arena().InUse() || st.Hits+st.Misses == 0 {
		t.Fatalf("stats %+v, arena in use %d", st, p.Arena().InUse())
	}
}
