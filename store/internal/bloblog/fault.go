package bloblog

import (
	"fmt"
	"runtime/debug"
	"syscall"
	"unsafe"
)

// Faults on mapped reads. A mapped blob file raises SIGBUS when a page is
// touched that the file no longer backs (the file was truncated under the
// mapping) or that the disk cannot read; Go cannot recover a SIGBUS by
// default, so the process would die. Every read of mapped bytes this
// package and the store make (CRC verification, CopyChunk, Assemble, Check
// and compaction's copies) runs inside File.Guard, which turns the fault
// into an error with debug.SetPanicOnFault: ErrCorruption when the file
// is now shorter than the faulting offset, or an I/O error wrapping
// syscall.EIO otherwise. Bytes the store hands to a caller (View.Chunk,
// View.Layer) alias the mapping and are touched by the caller's code, out
// of any Guard: callers that must survive a file truncated under them use
// View.CopyChunk or Options.DisableMmap, or guard their own reads.

// Guard runs fn, which reads mapped bytes of f, and returns fn's error or,
// if a read faulted, an error saying where. Other panics pass through.
func (f *File) Guard(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			ae, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			err = f.faultError(ae.Addr())
		}
	}()
	return fn()
}

// faultError explains a fault at address addr: the offset in f it maps
// to, and whether the file is now shorter than that.
func (f *File) faultError(addr uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	off, mapped := f.offsetLocked(addr)
	if f.rd != nil {
		if st, err := f.rd.Stat(); err == nil {
			f.size = uint64(st.Size())
		}
	}
	switch {
	case !mapped:
		return fmt.Errorf("store: blob file %s: memory fault at %#x outside its mappings: %w", f.path, addr, syscall.EIO)
	case off >= f.size:
		return fmt.Errorf("%w: blob file %s: truncated under its mapping: read at offset %d, file now %d bytes", ErrCorruption, f.path, off, f.size)
	default:
		return fmt.Errorf("store: blob file %s: read fault at offset %d of its mapping (a disk read error): %w", f.path, off, syscall.EIO)
	}
}

// offsetLocked maps addr back to an offset in the file.
func (f *File) offsetLocked(addr uintptr) (uint64, bool) {
	for _, m := range f.maps {
		if len(m) == 0 {
			continue
		}
		base := uintptr(unsafePointer(m))
		if addr >= base && addr < base+uintptr(len(m)) {
			return uint64(addr - base), true
		}
	}
	return 0, false
}

func unsafePointer(m []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(m)) }
