package store

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// extentLayout places a packet's chunks in its extent: chunk i at
// i*stride from the extent's start, stride being the chunk length rounded
// up to format.ChunkAlignment; zero padding; the trailer in the last
// format.TrailerSize bytes of the 4 KiB-aligned extent.
//
// Encoded chunks (codec.go) differ in length: lens and rels then give each
// chunk's stored length and offset, each chunk starting at the previous
// one's end rounded up to format.ChunkAlignment, and codecs each chunk's
// codec; raw is the decoded length of every chunk.
type extentLayout struct {
	chunks   int
	chunkLen uint64
	stride   uint64
	payload  uint64 // end of the last chunk: what the trailer's CRC covers
	length   uint64 // of the whole extent

	raw    uint64         // decoded bytes of each chunk
	lens   []uint64       // stored bytes of chunk i; nil when all are chunkLen
	rels   []uint64       // offset of chunk i; nil when i*stride
	codecs []format.Codec // nil when all raw
}

func newLayout(chunks int, chunkLen uint64) (extentLayout, error) {
	l := extentLayout{chunks: chunks, chunkLen: chunkLen, raw: chunkLen}
	stride, ok := format.AlignUp(chunkLen, format.ChunkAlignment)
	if !ok {
		return l, fmt.Errorf("%w: chunk of %d bytes overflows", ErrInvalidArgument, chunkLen)
	}
	l.stride = stride
	l.payload = uint64(chunks-1)*stride + chunkLen
	if l.length, ok = format.ExtentLength(l.payload); !ok {
		return l, fmt.Errorf("%w: extent of %d bytes overflows", ErrInvalidArgument, l.payload)
	}
	return l, nil
}

// rel is chunk i's offset from the extent's start.
func (l *extentLayout) rel(i int) uint64 {
	if l.rels != nil {
		return l.rels[i]
	}
	return uint64(i) * l.stride
}

// size is chunk i's stored length.
func (l *extentLayout) size(i int) uint64 {
	if l.lens != nil {
		return l.lens[i]
	}
	return l.chunkLen
}

// codec is chunk i's codec.
func (l *extentLayout) codec(i int) format.Codec {
	if l.codecs != nil {
		return l.codecs[i]
	}
	return format.CodecRaw
}

// pad is the number of zero bytes after chunk i (none after the last).
func (l *extentLayout) pad(i int) uint64 {
	if i == l.chunks-1 {
		return 0
	}
	return l.rel(i+1) - l.rel(i) - l.size(i)
}

// Tuning of writeExtent for large extents.
const (
	// parallelCRCMin is the payload size from which chunk CRCs are computed
	// on another goroutine while the chunks are written.
	parallelCRCMin = 1 << 20
	// writebackEvery is how many bytes are written between requests to
	// start writing back (vfs.File.SyncTo: sync_file_range on Linux), so
	// that the device works while later chunks are copied to the page
	// cache and the final fdatasync has little left to do.
	writebackEvery = 8 << 20
)

// writeExtent writes p's extent at off in f: every chunk straight from the
// caller's buffer (gathered into vectored writes when fd is f's OS
// descriptor, see writeChunks), zero padding, and the trailer.
// Every byte of the extent is written, so stale bytes of an earlier,
// uncommitted attempt never survive in it. It returns the chunks' CRC32Cs,
// computed from the same buffers (concurrently with the writes for large
// extents) and combined into the trailer's payload CRC without another pass.
// It does not return before it has stopped reading p's buffers.
func writeExtent(f vfs.File, fd uintptr, name string, off uint64, l *extentLayout, p *Packet, id format.PacketID) ([]uint32, error) {
	crcs := make([]uint32, l.chunks)
	crcDone := computeCRCs(crcs, p, l.payload >= parallelCRCMin)
	err := writeChunks(f, fd, name, off, l, p)
	<-crcDone
	if err != nil {
		return nil, err
	}
	tail := make([]byte, l.length-l.payload)
	t := format.Trailer{Packet: id, Offset: off, PayloadLen: l.payload, PayloadCRC: payloadCRC(l, crcs)}
	copy(tail[len(tail)-format.TrailerSize:], t.Encode())
	if err := writeAt(f, name, tail, off+l.payload); err != nil {
		return nil, err
	}
	return crcs, nil
}

// computeCRCs fills crcs with the CRC32C of each of p's chunks, on another
// goroutine if async; the returned channel is closed when it is done.
func computeCRCs(crcs []uint32, p *Packet, async bool) <-chan struct{} {
	done := make(chan struct{})
	run := func() {
		for i := range crcs {
			crcs[i] = crcStream(p.chunkSource(i))
		}
		close(done)
	}
	if async {
		go run()
	} else {
		run()
	}
	return done
}

// writeChunks writes p's chunks and the zero padding between them. With a
// descriptor fd (not vfs.InvalidFd) the buffers go to the kernel gathered,
// one pwritev(2) per writeback batch instead of one write per chunk and
// per padding (measured on this project's VM: a 9 MiB packet of 72
// chunks of 128 KiB wrote and synced 10% faster in one call); without one,
// one WriteAt per buffer through f.
func writeChunks(f vfs.File, fd uintptr, name string, off uint64, l *extentLayout, p *Packet) error {
	var zeros [format.ChunkAlignment]byte
	w := gatherWriter{f: f, fd: fd, name: name, at: off}
	writeback, pending := true, uint64(0)
	for i := range l.chunks {
		at := off + l.rel(i)
		w.add(p.chunkSource(i))
		if pad := l.pad(i); pad > 0 {
			w.add(zeros[:pad])
		}
		stride := l.size(i) + l.pad(i)
		if pending += stride; writeback && pending >= writebackEvery {
			pending = 0
			if err := w.flush(); err != nil {
				return err
			}
			full, err := f.SyncTo(int64(at + stride))
			if err != nil {
				return fmt.Errorf("store: start writeback of blob file %s: %w", name, err)
			}
			// A file system without sync_file_range syncs fully: once is enough.
			writeback = !full
		}
	}
	return w.flush()
}

// gatherWriter writes buffers bound for consecutive bytes of a file,
// starting at at: gathered into one vectored write per flush when it has a
// descriptor, else one WriteAt per buffer as they are added.
type gatherWriter struct {
	f    vfs.File
	fd   uintptr
	name string
	at   uint64 // where the first pending buffer goes
	bufs [][]byte
	err  error
}

func (w *gatherWriter) add(b []byte) {
	if w.err != nil {
		return
	}
	if w.fd == vfs.InvalidFd || !haveVectoredWrites {
		w.err = writeAt(w.f, w.name, b, w.at)
		w.at += uint64(len(b))
		return
	}
	w.bufs = append(w.bufs, b)
}

// flush writes what add gathered and returns the first error.
func (w *gatherWriter) flush() error {
	if w.err != nil || len(w.bufs) == 0 {
		return w.err
	}
	var want int
	for _, b := range w.bufs {
		want += len(b)
	}
	n, err := pwritev(w.fd, w.bufs, int64(w.at))
	if err == nil && n != want {
		err = fmt.Errorf("short write: %d of %d bytes", n, want)
	}
	if err != nil {
		w.err = fmt.Errorf("store: write blob file %s at %d: %w", w.name, w.at, err)
		return w.err
	}
	w.at += uint64(want)
	clear(w.bufs)
	w.bufs = w.bufs[:0]
	return nil
}

// payloadCRC is the CRC32C of the payload: the chunks and the zero padding
// between them, derived from the chunks' CRCs.
func payloadCRC(l *extentLayout, crcs []uint32) uint32 {
	var zeros [format.ChunkAlignment]byte
	var crc uint32
	for i, c := range crcs {
		crc = crcCombine(crc, c, l.size(i))
		if pad := l.pad(i); pad > 0 {
			crc = crcCombine(crc, format.CRC(zeros[:pad]), pad)
		}
	}
	return crc
}

// writeAt writes all of b at off of f, called name.
func writeAt(f vfs.File, name string, b []byte, off uint64) error {
	n, err := f.WriteAt(b, int64(off))
	if err == nil && n != len(b) {
		err = fmt.Errorf("short write: %d of %d bytes", n, len(b))
	}
	if err != nil {
		return fmt.Errorf("store: write blob file %s at %d: %w", name, off, err)
	}
	return nil
}
