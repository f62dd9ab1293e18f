package assemble

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/kvstore/kvstore/internal/rowcopy"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// scratch bounds each worker's scratch buffer (well inside L2), the bytes
// a run of rows is read into when the blob file is not mapped, and the
// runs a chunk is checksummed and placed in, so that a run's second read
// (by the rotation or the row copies) comes from cache.
const scratch = 256 << 10

// streamMin is the fewest bytes a run writes for the raw rows it copies or
// rotates from a mapping to be stored with non-temporal hints
// (rowcopy.Stream, Shifter.StreamRows): twice a large server's L3 cache
// per core complex (32 MiB), so that a destination that could stay cached
// for its reader is written through the cache as before. Stores that skip
// the cache need no read for ownership of the lines they fill, which is
// what a paged fill lost to the contiguous copy (BENCHMARKS.md,
// docs/decisions.md).
//
// A variable so that the tests can stream small destinations.
var streamMin = 64 << 20

// prefetchTokens is how many tokens ahead placeTokens hints a token's rows
// into the cache: its H rows lie in H places, more streams than the
// hardware prefetcher follows. 8 is 2 KiB ahead in each head's rows of 256
// bytes; 4, 8 and 16 measured alike in the store's BenchmarkAssemble, and
// 8 was a tenth faster than none in an in-memory fill.
const prefetchTokens = 8

// worker is one worker's scratch, allocated on first need.
type worker struct {
	rd   []byte
	crcs []uint32 // per head, for chunks read in token runs
	dec  []byte   // one decoded compressed chunk (decoded.go)
}

// idle keeps workers' scratch between runs, at most GOMAXPROCS of them:
// a run that reads its chunks (every read of a small packet, the first
// read of a larger one after Open, or a file not mapped) would otherwise
// allocate a new 256 KiB buffer and fault its pages in, which the first
// pread into it paid for. Not a sync.Pool: a garbage collection empties
// one, and a store's Open makes enough garbage that the first restore
// after it found the pool empty (llamacpp's BenchmarkRestore). A decoded
// chunk's buffer, as large as a chunk, is not kept.
var idle struct {
	sync.Mutex
	w []*worker
}

// getWorker takes an idle worker, or a new one.
func getWorker() *worker {
	idle.Lock()
	defer idle.Unlock()
	n := len(idle.w)
	if n == 0 {
		return new(worker)
	}
	w := idle.w[n-1]
	idle.w[n-1] = nil
	idle.w = idle.w[:n-1]
	return w
}

// put makes w idle again, unless GOMAXPROCS workers already are.
func (w *worker) put() {
	w.dec = nil
	idle.Lock()
	defer idle.Unlock()
	if len(idle.w) < runtime.GOMAXPROCS(0) {
		idle.w = append(idle.w, w)
	}
}

func (w *worker) buf(p *[]byte, n int) []byte {
	if cap(*p) < n {
		*p = make([]byte, max(n, scratch))
	}
	return (*p)[:n]
}

// fill writes layer l's K (key) or V of packet p into dst, a layer buffer
// of geometry g; keys are rotated by the packet's offset on the way. A
// chunk not yet verified has its CRC checked when its last row has passed,
// so a bad chunk fails its layer before the layer is reported.
func (a *Assembly) fill(w *worker, g *geom, dst []byte, p *packet, l int, key bool) error {
	i := 2 * l
	if !key {
		i++
	}
	var sh *reconstruct.Shifter // nil: values, and keys that stay put
	if key {
		sh = p.shift
	} else if g.layout == format.KVLayoutTransposedV {
		return a.fillTransposed(w, g, dst, p, i)
	}
	if p.sel != nil {
		return a.fillPruned(w, g, dst, p, i, sh)
	}
	if p.h.Chunks[i].Codec != format.CodecRaw {
		return a.fillDecoded(w, g, dst, p, i, sh)
	}
	s, err := a.source(w, p, i, g.rowBytes)
	if err != nil {
		return err
	}
	if g.layout == format.KVLayoutHND {
		err = a.fillContiguous(g, dst, &s, p.Row, sh)
	} else {
		err = a.fillPaged(w, g, dst, &s, p.Row, sh)
	}
	if err != nil {
		return err
	}
	return s.done()
}

// fillContiguous places each head's rows in runs of at most scratch
// bytes, each straight into its place in the destination
// (chunkSource.place), with streaming stores for a destination of
// g.stream, fenced once at the end.
func (a *Assembly) fillContiguous(g *geom, dst []byte, s *chunkSource, row int, sh *reconstruct.Shifter) error {
	run := max(1, scratch/s.rb)
	for h := range g.heads {
		for t0 := 0; t0 < s.n; t0 += run {
			k := min(run, s.n-t0)
			off := g.offset(h, row+t0)
			if err := s.place(a, dst[off:off+k*s.rb], h, t0, k, sh, g.stream); err != nil {
				return err
			}
		}
	}
	if g.stream {
		rowcopy.Fence() // as in fillPaged
	}
	return nil
}

// fillPaged walks the chunk in runs of tokens, all heads at once (at most
// scratch bytes), so that destination writes stay within a few blocks:
// each head's run is checksummed, then the run's rows go straight to their
// slots (placeTokens).
func (a *Assembly) fillPaged(w *worker, g *geom, dst []byte, s *chunkSource, row int, sh *reconstruct.Shifter) error {
	H, rb := g.heads, g.rowBytes
	run := max(1, min(s.n, scratch/(H*rb)))
	for t0 := 0; t0 < s.n; t0 += run {
		k := min(run, s.n-t0)
		var rd []byte
		if s.mapped == nil {
			rd = w.buf(&w.rd, H*k*rb)
		}
		for h := range H {
			if _, err := s.rows(h, t0, k, rd[min(h*k*rb, len(rd)):]); err != nil {
				return err
			}
		}
		// Head h's rows of the run lie at h*hs in the chunk (mapped) or in
		// rd; past the run, the mapping holds the rest of the chunk's
		// tokens, which placeTokens may prefetch.
		base, hs, ahead := rd, k*rb, k
		if s.mapped != nil {
			base, hs, ahead = s.mapped[t0*rb:], s.n*rb, s.n-t0
		}
		if err := a.placeTokens(g, dst, base, hs, row+t0, k, ahead, sh); err != nil {
			return err
		}
	}
	if g.stream {
		// Order the streaming stores before the layer is counted (a locked
		// instruction, the atomic count, would too; this says so).
		rowcopy.Fence()
	}
	return nil
}

// placeTokens puts k tokens' rows, from destination row t0 on, into their
// slots: token t's rows across heads are hs apart in src (from t's row of
// head 0; src holds ahead >= k tokens, the ones past k only prefetched)
// and g.head apart in its slot, so each token is one strided call
// over all heads, values copied (rowcopy.Copy) and keys rotated
// (reconstruct.Shifter.ShiftRows). One call per row cost as much as the
// bytes: a row is a few hundred bytes. With g.stream the same calls store
// non-temporally (rowcopy.Stream, Shifter.StreamRows), and fillPaged
// fences once at the end of the chunk: a fence per token cost more than
// the streaming saved (docs/decisions.md).
func (a *Assembly) placeTokens(g *geom, dst, src []byte, hs, t0, k, ahead int, sh *reconstruct.Shifter) error {
	H, rb, hd := g.heads, g.rowBytes, g.head
	slot := (H-1)*hd + rb // bytes from a slot's first row to the end of its last
	for t := range k {
		if t+prefetchTokens < ahead {
			rowcopy.Prefetch(src[(t+prefetchTokens)*rb:], H, rb, hs)
		}
		off := g.offset(0, t0+t)
		d, x := dst[off:off+slot], src[t*rb:]
		var err error
		switch {
		case sh == nil && g.stream:
			err = rowcopy.Stream(d, x, H, rb, hd, hs)
		case sh == nil:
			err = rowcopy.Copy(d, x, H, rb, hd, hs)
		case g.stream:
			err = sh.StreamRows(d, x, a.spec.DType, H, hd, hs)
		default:
			err = sh.ShiftRows(d, x, a.spec.DType, H, hd, hs)
		}
		if err != nil {
			return fmt.Errorf("assemble: %w", err) // shapes were checked: a bug
		}
	}
	return nil
}

// stream is shift out of place with streaming stores (rowcopy.Stream,
// Shifter.StreamRows), for a destination of g.stream; the caller fences.
func (a *Assembly) stream(dst, src []byte, rows int, sh *reconstruct.Shifter) error {
	rb := a.spec.HeadDim * a.spec.DType.Size()
	var err error
	if sh == nil {
		err = rowcopy.Stream(dst, src, rows, rb, rb, rb)
	} else {
		err = sh.StreamRows(dst, src, a.spec.DType, rows, rb, rb)
	}
	if err != nil {
		return fmt.Errorf("assemble: %w", err) // shapes were checked: a bug
	}
	return nil
}

// shift rotates rows of keys with sh from src into dst (a copy when sh is
// nil: values, and keys that stay where they are). dst may be src.
func (a *Assembly) shift(dst, src []byte, rows int, sh *reconstruct.Shifter) error {
	if sh == nil {
		copy(dst, src)
		return nil
	}
	if err := sh.Shift(dst, src, a.spec.DType, 1, rows); err != nil {
		return fmt.Errorf("assemble: %w", err) // shapes were checked: a bug
	}
	return nil
}
