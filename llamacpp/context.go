//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// CacheType is the element type of the KV cache.
type CacheType int

const (
	CacheF16 CacheType = iota // llama.cpp's default
	CacheF32
)

func (c CacheType) ggml() int32 {
	if c == CacheF32 {
		return ggmlF32
	}
	return ggmlF16
}

// ContextOptions are the settings of NewContext. Zero values take the
// defaults documented on each field.
type ContextOptions struct {
	// Ctx is the number of KV cells (the context length); 0: 512.
	Ctx int
	// Batch is the most tokens one Decode may take; 0: Ctx.
	Batch int
	// Threads is the number of CPU threads; 0: 1.
	Threads int
	// Cache is the KV cache's element type (F16 by default, as llama.cpp's).
	Cache CacheType
	// FlashAttn turns flash attention on; off, the V cache is transposed
	// (v_trans = 1 in the state).
	FlashAttn bool
	// Seqs is the most sequences the context holds (n_seq_max); 0: 1. The
	// cache is unified (one stream) so that states move between sequences.
	Seqs int
}

// Context is a llama.cpp context: a KV cache and the buffers to decode
// into it. It is not safe for concurrent use.
type Context struct {
	m    *Model
	lib  *Library
	ptr  uintptr
	mem  uintptr
	opts ContextOptions
	once sync.Once
	// shifted: sequences Shift moved and no Decode re-rotated since.
	shifted map[int]bool
	scratch []byte // Load's state buffer, reused
}

// Release frees the buffer Load keeps between calls (about the size of
// the largest state loaded).
func (c *Context) Release() { c.scratch = nil }

// NewContext creates a context for m.
func (m *Model) NewContext(o ContextOptions) (*Context, error) {
	if o.Ctx == 0 {
		o.Ctx = 512
	}
	if o.Batch == 0 {
		o.Batch = o.Ctx
	}
	if o.Threads == 0 {
		o.Threads = 1
	}
	if o.Seqs == 0 {
		o.Seqs = 1
	}
	if o.Ctx < 0 || o.Batch < 0 || o.Threads < 0 || o.Seqs < 0 || o.Ctx > 1<<24 || o.Seqs > 256 {
		return nil, fmt.Errorf("%w: context options %+v", ErrInvalidArgument, o)
	}
	p := m.lib.ctxDefaultParams()
	p.nCtx, p.nBatch, p.nUbatch, p.nSeqMax = uint32(o.Ctx), uint32(o.Batch), uint32(o.Batch), uint32(o.Seqs)
	p.nThreads, p.nThreadsBatch = int32(o.Threads), int32(o.Threads)
	p.typeK, p.typeV = o.Cache.ggml(), o.Cache.ggml()
	p.flashAttnType = flashAttnDisabled
	if o.FlashAttn {
		p.flashAttnType = flashAttnEnabled
	}
	p.kvUnified = true
	p.noPerf = true
	m.lib.takeLog()
	ptr := m.lib.initFromModel(m.ptr, p)
	if ptr == 0 {
		return nil, fmt.Errorf("%w: new context: %s", ErrLlama, m.lib.takeLog())
	}
	c := &Context{m: m, lib: m.lib, ptr: ptr, opts: o, shifted: map[int]bool{}}
	c.mem = m.lib.getMemory(ptr)
	return c, nil
}

// Model is the model the context runs.
func (c *Context) Model() *Model { return c.m }

// Options are the context's settings, defaults filled in.
func (c *Context) Options() ContextOptions { return c.opts }

// Close frees the context. It is idempotent.
func (c *Context) Close() {
	c.once.Do(func() {
		c.lib.free(c.ptr)
		c.ptr, c.mem = 0, 0 // every later call fails instead of touching freed memory
	})
}

// Decode runs tokens of sequence seq at positions pos, pos+1, ... and keeps
// the logits of the last token (Logits). It appends the tokens' keys and
// values to the sequence's cells.
func (c *Context) Decode(seq, pos int, tokens []int32) error {
	return c.decodeBatch(seq, pos, len(tokens), unsafe.Pointer(unsafe.SliceData(tokens)), nil)
}

// DecodeEmbd is Decode for input embeddings: n rows of Model.Embd floats.
func (c *Context) DecodeEmbd(seq, pos int, embd []float32) error {
	e := c.m.Embd
	if e == 0 || len(embd)%e != 0 {
		return fmt.Errorf("%w: decode: %d floats are not rows of %d", ErrInvalidArgument, len(embd), e)
	}
	return c.decodeBatch(seq, pos, len(embd)/e, nil, unsafe.Pointer(unsafe.SliceData(embd)))
}

func (c *Context) decodeBatch(seq, pos, n int, tok, embd unsafe.Pointer) error {
	if !c.seqOK(seq) {
		return c.badSeq("decode", seq)
	}
	if n == 0 || n > c.opts.Batch || pos < 0 || pos > 1<<30 {
		return fmt.Errorf("%w: decode %d tokens of sequence %d at %d (batch %d, %d sequences)", ErrInvalidArgument, n, seq, pos, c.opts.Batch, c.opts.Seqs)
	}
	posv := make([]int32, n)
	nseq := make([]int32, n)
	seqv := []int32{int32(seq)}
	seqp := make([]uintptr, n)
	logits := make([]int8, n)
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&seqv[0])
	for i := range n {
		posv[i], nseq[i], seqp[i] = int32(pos+i), 1, uintptr(unsafe.Pointer(&seqv[0]))
	}
	logits[n-1] = 1
	b := batch{nTokens: int32(n)}
	for _, p := range []struct {
		dst *uintptr
		ptr unsafe.Pointer
	}{{&b.token, tok}, {&b.embd, embd}, {&b.pos, unsafe.Pointer(&posv[0])}, {&b.nSeqID, unsafe.Pointer(&nseq[0])},
		{&b.seqID, unsafe.Pointer(&seqp[0])}, {&b.logits, unsafe.Pointer(&logits[0])}} {
		if p.ptr != nil {
			pin.Pin(p.ptr)
			*p.dst = uintptr(p.ptr)
		}
	}
	r := c.lib.decode(c.ptr, b)
	clear(c.shifted) // a decode applies every pending shift
	if r != 0 {
		return fmt.Errorf("%w: llama_decode of %d tokens at %d returned %d: %s", ErrLlama, n, pos, r, c.lib.takeLog())
	}
	return nil
}

// Logits returns a copy of the logits of the last decoded token.
func (c *Context) Logits() []float32 {
	if c.ptr == 0 {
		return nil
	}
	p := c.lib.getLogitsIth(c.ptr, -1)
	if p == nil {
		return nil
	}
	out := make([]float32, c.m.Vocab)
	copy(out, unsafe.Slice(p, c.m.Vocab))
	return out
}

// Clear empties every sequence.
func (c *Context) Clear() {
	if c.ptr != 0 {
		c.lib.memoryClear(c.mem, true)
	}
}

// seqOK reports whether the context is open and seq names one of its
// sequences: llama.cpp aborts the process on any other.
func (c *Context) seqOK(seq int) bool { return c.ptr != 0 && seq >= 0 && seq < c.opts.Seqs }

func (c *Context) badSeq(what string, seq int) error {
	if c.ptr == 0 {
		return fmt.Errorf("%w: %s: context closed", ErrInvalidArgument, what)
	}
	return fmt.Errorf("%w: %s: sequence %d of a context of %d", ErrInvalidArgument, what, seq, c.opts.Seqs)
}

// Remove drops sequence seq's cells at positions [p0, p1) (p0 < 0: from
// the start; p1 < 0: to the end); it reports whether it could.
func (c *Context) Remove(seq, p0, p1 int) bool {
	if !c.seqOK(seq) {
		return false
	}
	return c.lib.memorySeqRm(c.mem, int32(seq), int32(p0), int32(p1))
}

// Shift adds delta to the positions of sequence seq's cells in [p0, p1).
// llama.cpp re-rotates the keys lazily, at the next Decode: a state
// exported before then holds keys at their old positions (Save refuses
// it).
func (c *Context) Shift(seq, p0, p1, delta int) error {
	if !c.seqOK(seq) {
		return c.badSeq("shift", seq)
	}
	c.lib.memorySeqAdd(c.mem, int32(seq), int32(p0), int32(p1), int32(delta))
	c.shifted[seq] = true
	return nil
}

// Copy makes sequence dst share src's cells at positions [p0, p1) (p1 < 0:
// to the end). The cache is unified, so the cells are shared, not copied;
// a pending Shift of src's cells travels with them.
func (c *Context) Copy(src, dst, p0, p1 int) error {
	if !c.seqOK(src) || !c.seqOK(dst) {
		return c.badSeq("copy", max(src, dst))
	}
	c.lib.memorySeqCp(c.mem, int32(src), int32(dst), int32(p0), int32(p1))
	if c.shifted[src] {
		c.shifted[dst] = true
	}
	return nil
}

// Cells is the context's number of KV cells (llama_n_ctx).
func (c *Context) Cells() int {
	if c.ptr == 0 {
		return 0
	}
	return int(c.lib.nCtx(c.ptr))
}

// PosRange is the smallest and largest position of sequence seq; both -1
// when it is empty (or not a sequence of the context).
func (c *Context) PosRange(seq int) (lo, hi int) {
	if !c.seqOK(seq) {
		return -1, -1
	}
	return int(c.lib.memorySeqPosMin(c.mem, int32(seq))), int(c.lib.memorySeqPosMax(c.mem, int32(seq)))
}

// StateSize is the bytes of sequence seq's state (0 for a sequence the
// context does not have).
func (c *Context) StateSize(seq int) int {
	if !c.seqOK(seq) {
		return 0
	}
	return int(c.lib.stateSeqGetSize(c.ptr, int32(seq)))
}

// AppendState appends sequence seq's state (llama_state_seq_get_data) to
// buf.
func (c *Context) AppendState(buf []byte, seq int) ([]byte, error) {
	n := c.StateSize(seq)
	if n == 0 {
		return buf, fmt.Errorf("%w: state size of sequence %d: %s", ErrLlama, seq, c.lib.takeLog())
	}
	buf = growLen(buf, n)
	dst := buf[len(buf)-n:]
	got := c.lib.stateSeqGetData(c.ptr, unsafe.Pointer(unsafe.SliceData(dst)), uintptr(n), int32(seq))
	if int(got) != n {
		return buf[:len(buf)-n], fmt.Errorf("%w: state of sequence %d: %d of %d bytes: %s", ErrLlama, seq, got, n, c.lib.takeLog())
	}
	return buf, nil
}

// SetState imports a state into sequence seq (llama_state_seq_set_data)
// after removing its cells. On failure the sequence is left empty: a
// truncated state can fail yet leave cells restored.
func (c *Context) SetState(seq int, state []byte) error {
	if !c.seqOK(seq) {
		return c.badSeq("set state", seq)
	}
	if len(state) == 0 {
		return fmt.Errorf("%w: empty state", ErrState)
	}
	c.Remove(seq, -1, -1)
	got := c.lib.stateSeqSetData(c.ptr, unsafe.Pointer(unsafe.SliceData(state)), uintptr(len(state)), int32(seq))
	runtime.KeepAlive(state)
	if int(got) != len(state) {
		c.Remove(seq, -1, -1)
		return fmt.Errorf("%w: llama_state_seq_set_data read %d of %d bytes: %s", ErrState, got, len(state), c.lib.takeLog())
	}
	return nil
}

// SaveFile is llama.cpp's own llama_state_seq_save_file of sequence seq
// with its tokens; it returns the bytes written.
func (c *Context) SaveFile(path string, seq int, tokens []int32) (int, error) {
	if !c.seqOK(seq) {
		return 0, c.badSeq("save file", seq)
	}
	var tp unsafe.Pointer
	if len(tokens) > 0 {
		tp = unsafe.Pointer(&tokens[0])
	}
	n := c.lib.stateSeqSaveFile(c.ptr, path, int32(seq), tp, uintptr(len(tokens)))
	runtime.KeepAlive(tokens)
	if n == 0 {
		return 0, fmt.Errorf("%w: llama_state_seq_save_file %s: %s", ErrLlama, path, c.lib.takeLog())
	}
	return int(n), nil
}

// LoadFile is llama.cpp's own llama_state_seq_load_file into sequence seq;
// it returns the tokens saved with the state. On failure the sequence is
// left empty.
func (c *Context) LoadFile(path string, seq int, maxTokens int) ([]int32, error) {
	if !c.seqOK(seq) {
		return nil, c.badSeq("load file", seq)
	}
	toks := make([]int32, max(maxTokens, 1))
	var n uintptr
	c.Remove(seq, -1, -1)
	r := c.lib.stateSeqLoadFile(c.ptr, path, int32(seq), unsafe.Pointer(&toks[0]), uintptr(len(toks)), &n)
	if r == 0 {
		c.Remove(seq, -1, -1)
		return nil, fmt.Errorf("%w: llama_state_seq_load_file %s: %s", ErrLlama, path, c.lib.takeLog())
	}
	return toks[:n], nil
}

// growLen extends b by n bytes, reallocating when needed.
func growLen(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}
