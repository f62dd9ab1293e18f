package view

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// View is a packet read from the store: its header and, chunk by chunk, its
// tensors. On an OS file system the bytes alias a read-only mapping of the
// blob file (zero copies); elsewhere each chunk is copied into the View on
// first use. Chunks are verified against their CRC32C on first read (unless
// Options.DisableChecksums), so no unverified byte is returned.
//
// A View pins its blob file: the bytes stay valid and unchanged, even if the
// packet is deleted or the DB closed, until Release. Slices returned by
// Layer and Chunk must not be written to and must not be used after
// Release. A View is safe for concurrent use.
type View struct {
	h      *format.PacketHeader
	file   *bloblog.File
	verify bool
	st     Counters
	closed error // the store's ErrClosed

	mu       sync.RWMutex // Release takes it exclusively
	released bool
	extent   []byte        // mapped: the whole extent; nil when copying
	seen     []atomic.Bool // chunk i was returned (and verified) through this view
	advised  atomic.Bool   // advise has run: asked for the extent, or found it cached

	loadMu sync.Mutex // copying: serialises loads into bufs
	bufs   [][]byte

	dec viewDecoded // decoded compressed chunks (decode.go)

	keepMu sync.Mutex
	keep   *prune.Set // a pruned packet's positions, once decoded (keep.go)
}

// Counters are the store's activity counters a view adds to.
type Counters struct {
	BytesRead, VerifiedBytes, Corruptions *atomic.Uint64
	Views                                 *atomic.Int64 // decremented on Release
}

// Options are what a view needs of the store: whether to verify chunks
// (not Options.DisableChecksums), the counters, and the error a released
// view returns (the store's ErrClosed, so that errors.Is works with it).
type Options struct {
	Verify   bool
	Counters Counters
	Closed   error
}

// New is a view of packet h in blob file f, holding the caller's
// reference on f until Release.
func New(h *format.PacketHeader, f *bloblog.File, o Options) (*View, error) {
	extent, err := f.Span(h.ExtentOffset, h.ExtentLength)
	if err != nil {
		return nil, fmt.Errorf("packet %s: %w", h.ID.Short(), err)
	}
	v := &View{h: h, file: f, verify: o.Verify, st: o.Counters, closed: o.Closed, extent: extent, seen: make([]atomic.Bool, len(h.Chunks))}
	if extent == nil {
		v.bufs = make([][]byte, len(h.Chunks))
	}
	return v, nil
}

// Header returns the packet's header, decoded for this view. Do not modify
// it: the view reads its chunk descriptors. It stays readable after Release.
func (v *View) Header() *format.PacketHeader { return v.h }

// Layers is the number of layers; Layer accepts 0..Layers()-1.
func (v *View) Layers() int { return int(v.h.Layers) }

// Layer returns layer l's keys and values, each [kv_heads][tokens][head_dim]
// in the header's dtype; [kv_heads][k][head_dim] for a pruned packet, its
// kept rows (see Keep). A compressed chunk is verified, then decoded once
// into a buffer the view owns (not zero-copy; see decode.go).
func (v *View) Layer(l int) (k, val []byte, err error) {
	if l < 0 || l >= int(v.h.Layers) {
		return nil, nil, fmt.Errorf("%w: layer %d of a %d-layer packet", ErrInvalidArgument, l, v.h.Layers)
	}
	if k, err = v.decoded(2 * l); err != nil {
		return nil, nil, err
	}
	if val, err = v.decoded(2*l + 1); err != nil {
		return nil, nil, err
	}
	return k, val, nil
}

// Chunk returns chunk i's stored bytes: layer i/2, K if i is even, V if odd;
// encoded under the chunk's codec (Header().Chunks[i].Codec) when not raw.
// A pruned packet's chunk 2*Layers() is its positions (see Keep).
// A chunk that fails its CRC is ErrCorruption (a *ChunkError naming file,
// offset, packet, layer and K|V), every time it is asked for.
func (v *View) Chunk(i int) ([]byte, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.released {
		return nil, fmt.Errorf("%w: view of packet %s was released", v.closed, v.h.ID.Short())
	}
	if i < 0 || i >= len(v.h.Chunks) {
		return nil, fmt.Errorf("%w: chunk %d of a %d-chunk packet", ErrInvalidArgument, i, len(v.h.Chunks))
	}
	if v.extent == nil {
		return v.copied(i)
	}
	c := &v.h.Chunks[i]
	rel := c.Offset - v.h.ExtentOffset
	if c.Offset < v.h.ExtentOffset || rel > uint64(len(v.extent)) || c.Length > uint64(len(v.extent))-rel {
		// Only possible if the caller modified the header.
		return nil, fmt.Errorf("%w: chunk %d [%d, +%d) outside the view's extent", ErrInvalidArgument, i, c.Offset, c.Length)
	}
	b := v.extent[rel : rel+c.Length : rel+c.Length]
	if v.seen[i].Load() {
		return b, nil
	}
	if v.verify && !v.file.IsVerified(c.Offset, c.CRC32C) {
		v.advise()
		if err := v.file.Guard(func() error { return v.file.CheckChunk(v.h, c, b) }); err != nil {
			v.st.Corruptions.Add(1)
			return nil, err
		}
		v.file.MarkVerified(c.Offset, c.CRC32C)
		v.st.VerifiedBytes.Add(c.Length)
	}
	v.first(i, c.Length)
	return b, nil
}

// adviseMax is the largest extent advise reads ahead whole: twice the
// mmap read-around of a disk with read_ahead_kb 8192.
const adviseMax = 16 << 20

// advise is called before the first pass over a mapped chunk. The first
// time, if the packet's extent is at most adviseMax bytes, it asks the
// kernel to read the whole extent. The chunks' faults then find their pages
// cached or in flight, and the kernel's mmap read-around does not start: it
// would read up to read_ahead_kb before and after the faulting page, into
// neighbouring packets of the blob file, which on a small packet is more
// than the packet (2.67x the bytes of a 9 MiB packet were read). Larger
// extents are left to the kernel's readahead: there the overshoot is a
// smaller share, and measured, asking for them whole was slower than the
// kernel's own readahead (BENCHMARKS.md, Peers). An extent whose first
// page is cached is taken for warm and not asked for: asking costs about
// 0.2 ms per 9 MiB even when every page is cached.
func (v *View) advise() {
	if len(v.extent) > adviseMax || v.advised.Swap(true) || bloblog.Resident(v.extent) {
		return
	}
	_ = bloblog.AdviseWillNeed(v.extent) // advice: a refusal only costs speed
}

// copied returns chunk i, reading it on first use.
func (v *View) copied(i int) ([]byte, error) {
	v.loadMu.Lock()
	defer v.loadMu.Unlock()
	if b := v.bufs[i]; b != nil {
		return b, nil
	}
	b, err := v.file.Chunk(v.h, i, nil, v.verify)
	if err != nil {
		if errors.Is(err, ErrCorruption) {
			v.st.Corruptions.Add(1)
		}
		return nil, err
	}
	if v.verify {
		v.st.VerifiedBytes.Add(uint64(len(b)))
	}
	v.bufs[i] = b
	v.first(i, uint64(len(b)))
	return b, nil
}

// first counts a chunk's bytes the first time this view returns it.
func (v *View) first(i int, n uint64) {
	if !v.seen[i].Swap(true) {
		v.st.BytesRead.Add(n)
	}
}

// Release ends the view: its blob file may then be unmapped and, if
// obsolete, removed. It is idempotent; afterwards Layer and Chunk return
// ErrClosed.
func (v *View) Release() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.released {
		return
	}
	v.released = true
	v.extent, v.bufs = nil, nil
	v.dec.mu.Lock()
	v.dec.bufs = nil
	v.dec.mu.Unlock()
	v.file.Release()
	v.st.Views.Add(-1)
}

// File is v's blob file, for the store's tests and its readers that need
// the file itself (not a method, so that it stays off the public View).
func File(v *View) *bloblog.File { return v.file }

// Mapped reports whether v aliases a mapping (false: it copies chunks).
func Mapped(v *View) bool { return v.extent != nil }

// Advised reports whether v has asked the kernel to read its extent ahead
// (or found it cached), for the store's tests.
func Advised(v *View) bool { return v.advised.Load() }
