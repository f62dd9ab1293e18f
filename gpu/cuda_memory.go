package gpu

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"github.com/kvstore/kvstore/gpu/internal/cuda"
)

func (d *cudaDevice) Alloc(n int) (Buffer, error) {
	if n <= 0 {
		return Buffer{}, fmt.Errorf("%w: cuda device: alloc of %d bytes", ErrInvalidArgument, n)
	}
	var ptr uint64
	if err := d.do("cuMemAlloc_v2", func() cuda.Result { return d.drv.MemAlloc(&ptr, uint64(n)) }); err != nil {
		if e := (*CUDAError)(nil); errors.As(err, &e) && e.Code == 2 {
			return Buffer{}, fmt.Errorf("%w: %d bytes of device memory: %w", ErrBudget, n, err)
		}
		return Buffer{}, err
	}
	return Buffer{mem: &memory{owner: d, ptr: ptr, size: n}, n: n}, nil
}

func (d *cudaDevice) Free(b Buffer) error {
	if err := b.ownedBy(d, "free"); err != nil {
		return err
	}
	if !b.whole() {
		return fmt.Errorf("%w: cuda device: free of a sub-buffer or a wrapped buffer", ErrInvalidArgument)
	}
	return d.do("cuMemFree_v2", func() cuda.Result { return d.drv.MemFree(b.mem.ptr) })
}

// Wrap makes a Buffer of n bytes at device address ptr, memory owned by
// other CUDA code in the process (the server's KV cache), so that kernels
// can write into it. Free refuses it; the owner frees it.
func (d *cudaDevice) Wrap(ptr uint64, n int) (Buffer, error) {
	if ptr == 0 || n <= 0 {
		return Buffer{}, fmt.Errorf("%w: cuda device: wrap of %d bytes at %#x", ErrInvalidArgument, n, ptr)
	}
	return Buffer{mem: &memory{owner: d, ptr: ptr, size: n, foreign: true}, n: n}, nil
}

func (d *cudaDevice) AllocHost(n int) (HostBuffer, error) {
	if n <= 0 {
		return HostBuffer{}, fmt.Errorf("%w: cuda device: host alloc of %d bytes", ErrInvalidArgument, n)
	}
	var p unsafe.Pointer
	err := d.do("cuMemHostAlloc", func() cuda.Result { return d.drv.MemHostAlloc(&p, uint64(n), cuda.MemHostAllocPortable) })
	if err != nil {
		return HostBuffer{}, err
	}
	h := HostBuffer{b: unsafe.Slice((*byte)(p), n), owner: d, pinned: true, ptr: uintptr(p)}
	d.pinned.add(h.ptr, n)
	return h, nil
}

func (d *cudaDevice) FreeHost(h HostBuffer) error {
	if h.owner != d || !h.pinned || len(h.b) == 0 {
		return fmt.Errorf("%w: cuda device: free of a host buffer of another device", ErrInvalidArgument)
	}
	d.pinned.remove(h.ptr)
	return d.do("cuMemFreeHost", func() cuda.Result { return d.drv.MemFreeHost(unsafe.Pointer(unsafe.SliceData(h.b))) })
}

// pinnedSet remembers the page-locked ranges AllocHost handed out, so that
// copies can tell pinned memory (asynchronous) from Go memory (completed
// before returning).
type pinnedSet struct {
	mu     sync.Mutex
	starts []uintptr
	ends   map[uintptr]uintptr
}

func (p *pinnedSet) add(start uintptr, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ends == nil {
		p.ends = map[uintptr]uintptr{}
	}
	i := sort.Search(len(p.starts), func(i int) bool { return p.starts[i] >= start })
	p.starts = append(p.starts, 0)
	copy(p.starts[i+1:], p.starts[i:])
	p.starts[i] = start
	p.ends[start] = start + uintptr(n)
}

func (p *pinnedSet) remove(start uintptr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.starts), func(i int) bool { return p.starts[i] >= start })
	if i < len(p.starts) && p.starts[i] == start {
		p.starts = append(p.starts[:i], p.starts[i+1:]...)
		delete(p.ends, start)
	}
}

// contains reports whether [b, b+len(b)) lies in one pinned range.
func (p *pinnedSet) contains(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	hi := lo + uintptr(len(b))
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.starts), func(i int) bool { return p.starts[i] > lo }) - 1
	return i >= 0 && hi <= p.ends[p.starts[i]]
}
