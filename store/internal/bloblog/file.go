package bloblog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// File is the read side of one blob file: a reference count, the file
// handle, its mappings and the cache of verified chunks. The DB's registry
// holds one reference while the file is catalogued and the DB is open; each
// View holds one more. When the count reaches zero the mappings are unmapped
// and the handle closed; a file marked obsolete (by compaction, once it has
// repointed every header) is then also removed. So a View's bytes stay
// valid, whatever happens to the catalog, until it is released.
type File struct {
	num     uint32
	path    string
	fs      vfs.FS
	tryMmap bool
	reserve uint64 // minimum mapping length, so that a growing file is rarely remapped
	log     *slog.Logger

	refs     atomic.Int64
	obsolete atomic.Bool

	mu     sync.Mutex // guards everything below
	rd     vfs.File   // opened on first read
	mapped bool       // rd is mmapped; otherwise reads copy
	maps   [][]byte   // every mapping made; the last is the largest
	size   uint64     // file size last seen by Stat

	vmu      sync.RWMutex
	verified map[uint64]uint32 // chunk offset -> CRC32C it was verified against
}

func NewFile(fs vfs.FS, dir string, num uint32, tryMmap bool, reserve uint64, log *slog.Logger) *File {
	f := &File{
		num: num, path: fs.PathJoin(dir, FileName(num)), fs: fs,
		tryMmap: tryMmap && MmapSupported, reserve: reserve, log: log,
		verified: make(map[uint64]uint32),
	}
	f.refs.Store(1)
	return f
}

// Num is the file's number.
func (f *File) Num() uint32 { return f.num }

// Path is the file's path.
func (f *File) Path() string { return f.path }

// FileName is NNNNNN.blob.
func FileName(num uint32) string { return fmt.Sprintf("%06d.blob", num) }

// acquire takes a reference; false if the file is already closed.
func (f *File) Acquire() bool {
	for {
		n := f.refs.Load()
		if n <= 0 {
			return false
		}
		if f.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one unmaps, closes and, if the file
// is obsolete, removes it.
func (f *File) Release() {
	n := f.refs.Add(-1)
	if n > 0 {
		return
	}
	if n < 0 {
		panic(fmt.Sprintf("store: blob file %06d released more often than acquired", f.num))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.maps {
		if err := munmapFile(m); err != nil {
			f.log.Error("store: munmap blob file", "file", f.path, "err", err)
		}
	}
	f.maps = nil
	if f.rd != nil {
		_ = f.rd.Close()
		f.rd = nil
	}
	if f.obsolete.Load() {
		if err := f.fs.Remove(f.path); err != nil {
			f.log.Error("store: remove obsolete blob file", "file", f.path, "err", err)
		}
	}
}

// markObsolete asks for the file to be removed once the last reference is
// dropped. Compaction calls it after the catalog no longer points into the
// file, then drops the registry's reference.
func (f *File) MarkObsolete() { f.obsolete.Store(true) }

// Refs is the number of references held now.
func (f *File) Refs() int64 { return f.refs.Load() }

// Referenced reports whether any reference is held: once false, the file is
// closed (and, if obsolete, removed) for good.
func (f *File) Referenced() bool { return f.refs.Load() > 0 }

// Views is the number of references other than the registry's.
func (f *File) Views() int { return max(int(f.refs.Load())-1, 0) }

// openLocked opens the read handle and decides between mmap and copies.
func (f *File) openLocked() error {
	if f.rd != nil {
		return nil
	}
	rd, err := f.fs.Open(f.path)
	if errors.Is(err, iofs.ErrNotExist) {
		// The catalog names this file: its absence is damage, not a miss.
		return fmt.Errorf("%w: catalogued blob file %s is missing: %w", ErrCorruption, f.path, err)
	}
	if err != nil {
		return fmt.Errorf("store: open blob file %s: %w", f.path, err)
	}
	if err := f.checkHeader(rd); err != nil {
		_ = rd.Close()
		return err
	}
	f.rd = rd
	f.mapped = f.tryMmap && rd.Fd() != vfs.InvalidFd
	return nil
}

// checkHeader reads the file's blob header before any extent of it is
// served. An intact header (its CRC32C holds) that claims a newer format
// major is refused with ErrVersion, and one that is not a blob header or
// names another file number with ErrCorruption. A damaged header (its CRC
// fails) is not a reason to refuse the file's extents, which carry their
// own checksums: they are served, and Check reports the header. It costs
// one small read per file per Open.
func (f *File) checkHeader(rd vfs.File) error {
	var b [headerCheckLen]byte
	n, err := rd.ReadAt(b[:], 0)
	if n < len(b) {
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("store: read blob file %s header: %w", f.path, err)
		}
		return nil // too short to hold an extent: ensureLocked refuses reads
	}
	if binary.LittleEndian.Uint32(b[16:]) != format.CRC(b[:16]) {
		return nil
	}
	num, err := format.DecodeBlobHeader(b[:])
	if err != nil {
		return fmt.Errorf("blob file %s: %w", f.path, err)
	}
	if num != f.num {
		return fmt.Errorf("%w: blob file %s: header names file %06d", ErrCorruption, f.path, num)
	}
	return nil
}

// headerCheckLen is the part of the 4 KiB blob header that is used: magic,
// major, minor, file number, CRC32C (format/layout.go).
const headerCheckLen = 20

// ensureLocked checks that [off, off+n) lies inside the file, so that a
// mapping is never touched past its end (SIGBUS) and a copy is never short.
func (f *File) ensureLocked(off, n uint64) error {
	end := off + n
	if end < off {
		return fmt.Errorf("%w: blob file %s: range [%d, +%d) overflows", ErrCorruption, f.path, off, n)
	}
	if end <= f.size {
		return nil
	}
	st, err := f.rd.Stat()
	if err != nil {
		return fmt.Errorf("store: stat blob file %s: %w", f.path, err)
	}
	f.size = uint64(st.Size())
	if end > f.size {
		return fmt.Errorf("%w: blob file %s: extent [%d, +%d) ends past the file's %d bytes", ErrCorruption, f.path, off, n, f.size)
	}
	return nil
}

// span returns [off, off+n) of the file: a slice of a mapping when the
// file is mapped (valid while the caller holds a reference), or nil when
// reads must copy. It checks the range against the file's size.
func (f *File) Span(off, n uint64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.openLocked(); err != nil {
		return nil, err
	}
	if err := f.ensureLocked(off, n); err != nil {
		return nil, err
	}
	if !f.mapped {
		return nil, nil
	}
	if k := len(f.maps); k == 0 || uint64(len(f.maps[k-1])) < off+n {
		if err := f.remapLocked(off + n); err != nil {
			return nil, err
		}
	}
	m := f.maps[len(f.maps)-1]
	return m[off : off+n : off+n], nil
}

// Preopen does, once, what the file's first read would: it opens the
// read handle, checks the blob header and, when the file is mapped, maps
// it (at least the reserve: see remapLocked). The store's Open calls it
// for the files it registers, so that the first read after Open finds
// them open and mapped. A failure is not returned and changes nothing:
// the first read tries again and reports it, as it would have.
func (f *File) Preopen() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.openLocked() != nil || !f.mapped || len(f.maps) > 0 {
		return
	}
	st, err := f.rd.Stat()
	if err != nil {
		return
	}
	f.size = uint64(st.Size())
	_ = f.remapLocked(f.size)
}

// IsOpen reports whether the read handle is open (Preopen, or a read).
func (f *File) IsOpen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rd != nil
}

// remapLocked adds a mapping of at least need bytes. Older mappings stay
// until the file is closed: views may still use them.
func (f *File) remapLocked(need uint64) error {
	page := uint64(os.Getpagesize())
	length, ok := format.AlignUp(max(need, f.reserve, f.size), page)
	if !ok || length > uint64(maxMapping) {
		return fmt.Errorf("%w: blob file %s: mapping of %d bytes is too large", ErrCorruption, f.path, need)
	}
	m, err := mmapFile(f.rd.Fd(), int(length))
	if err != nil {
		return fmt.Errorf("store: mmap blob file %s (%d bytes): %w", f.path, length, err)
	}
	f.maps = append(f.maps, m)
	return nil
}

// maxMapping bounds one mapping (1 TiB): far beyond any sane file, and well
// inside a 64-bit address space.
const maxMapping = 1 << 40

// readAt copies [off, off+len(dst)) of the file into dst.
func (f *File) ReadAt(dst []byte, off uint64) error {
	f.mu.Lock()
	err := f.openLocked()
	if err == nil {
		err = f.ensureLocked(off, uint64(len(dst)))
	}
	rd := f.rd
	f.mu.Unlock()
	if err != nil {
		return err
	}
	n, err := rd.ReadAt(dst, int64(off))
	if n == len(dst) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: blob file %s: short read at %d: %d of %d bytes", ErrCorruption, f.path, off, n, len(dst))
	}
	return fmt.Errorf("store: read blob file %s at %d: %w", f.path, off, err)
}

// isVerified reports whether the chunk at off was verified against crc.
func (f *File) IsVerified(off uint64, crc uint32) bool {
	f.vmu.RLock()
	c, ok := f.verified[off]
	f.vmu.RUnlock()
	return ok && c == crc
}

// markVerified remembers that the chunk at off matched crc. Only a mapped
// file's bytes stay the same bytes after verification, so only mapped
// chunks are remembered.
func (f *File) MarkVerified(off uint64, crc uint32) {
	f.vmu.Lock()
	f.verified[off] = crc
	f.vmu.Unlock()
}

// forgetVerified drops the verification cache (benchmarks and tests).
func (f *File) ForgetVerified() {
	f.vmu.Lock()
	clear(f.verified)
	f.vmu.Unlock()
}
