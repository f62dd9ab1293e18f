package bloblog

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// Layout places a packet's chunks in its extent: chunk i at
// i*stride from the extent's start, stride being the chunk length rounded
// up to format.ChunkAlignment; zero padding; the trailer in the last
// format.TrailerSize bytes of the 4 KiB-aligned extent.
//
// Encoded chunks (NewEncodedLayout) differ in length: Lens and Rels then
// give each chunk's stored length and offset, each chunk starting at the
// previous one's end rounded up to format.ChunkAlignment, and Codecs each
// chunk's codec; Raw is the decoded length of every chunk.
type Layout struct {
	Chunks   int
	ChunkLen uint64
	Stride   uint64
	Payload  uint64 // end of the last chunk: what the trailer's CRC covers
	Length   uint64 // of the whole extent

	Raw    uint64         // decoded bytes of each chunk
	Lens   []uint64       // stored bytes of chunk i; nil when all are ChunkLen
	Rels   []uint64       // offset of chunk i; nil when i*Stride
	Codecs []format.Codec // nil when all raw

	// Prefix is the number of bytes before chunk 0, where the put record
	// goes (SetPrefix); 0 for an extent without one.
	Prefix uint64
}

func NewLayout(chunks int, chunkLen uint64) (Layout, error) {
	l := Layout{Chunks: chunks, ChunkLen: chunkLen, Raw: chunkLen}
	stride, ok := format.AlignUp(chunkLen, format.ChunkAlignment)
	if !ok {
		return l, fmt.Errorf("%w: chunk of %d bytes overflows", ErrInvalidArgument, chunkLen)
	}
	l.Stride = stride
	l.Payload = uint64(chunks-1)*stride + chunkLen
	if l.Length, ok = format.ExtentLength(l.Payload); !ok {
		return l, fmt.Errorf("%w: extent of %d bytes overflows", ErrInvalidArgument, l.Payload)
	}
	return l, nil
}

// rel is chunk i's offset from the extent's start.
// NewEncodedLayout places chunks of the stored lengths lens, each raw
// bytes once decoded by its codec, whatever their lengths.
func NewEncodedLayout(lens []uint64, raw uint64, codecs []format.Codec) (Layout, error) {
	n := len(lens)
	l := Layout{Chunks: n, Raw: raw, Codecs: codecs, Lens: lens, Rels: make([]uint64, n)}
	var at uint64
	for i := range n {
		l.Rels[i] = at
		end := at + l.Lens[i]
		l.Payload = end
		var ok bool
		if at, ok = format.AlignUp(end, format.ChunkAlignment); !ok {
			return l, fmt.Errorf("%w: extent of %d bytes overflows", ErrInvalidArgument, end)
		}
	}
	var ok bool
	if l.Length, ok = format.ExtentLength(l.Payload); !ok {
		return l, fmt.Errorf("%w: extent of %d bytes overflows", ErrInvalidArgument, l.Payload)
	}
	return l, nil
}

func (l *Layout) Rel(i int) uint64 {
	if l.Rels != nil {
		return l.Prefix + l.Rels[i]
	}
	return l.Prefix + uint64(i)*l.Stride
}

// size is chunk i's stored length.
func (l *Layout) Size(i int) uint64 {
	if l.Lens != nil {
		return l.Lens[i]
	}
	return l.ChunkLen
}

// SetPrefix reserves the first n bytes of the extent (rounded up to
// format.ChunkAlignment) for a record that leads it, the put record
// (format/put_record.go): every chunk moves up by that much, and the
// payload the trailer's CRC covers starts at the extent's first byte, the
// record included.
func (l *Layout) SetPrefix(n uint64) error {
	p, ok := format.AlignUp(n, format.ChunkAlignment)
	if !ok || l.Payload+p < l.Payload {
		return fmt.Errorf("%w: extent prefix of %d bytes overflows", ErrInvalidArgument, n)
	}
	l.Payload += p - l.Prefix
	l.Prefix = p
	if l.Length, ok = format.ExtentLength(l.Payload); !ok {
		return fmt.Errorf("%w: extent of %d bytes overflows", ErrInvalidArgument, l.Payload)
	}
	return nil
}

// codec is chunk i's codec.
func (l *Layout) Codec(i int) format.Codec {
	if l.Codecs != nil {
		return l.Codecs[i]
	}
	return format.CodecRaw
}

// pad is the number of zero bytes after chunk i (none after the last).
func (l *Layout) Pad(i int) uint64 {
	if i == l.Chunks-1 {
		return 0
	}
	return l.Rel(i+1) - l.Rel(i) - l.Size(i)
}

// Tuning of WriteExtent for large extents.
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

// WriteExtent writes the extent of packet (or context) id at off in f:
// every chunk i straight from the caller's buffer chunk(i) (gathered into vectored writes when fd is f's OS
// descriptor, see writeChunks), zero padding, and the trailer. With a
// prefix (l.Prefix > 0) lead is called once the chunks' CRCs are known and
// returns the record that leads the extent, at most l.Prefix bytes (the
// rest of the prefix is zeroed); the payload CRC covers it.
// Every byte of the extent is written, so stale bytes of an earlier,
// uncommitted attempt never survive in it. It returns the chunks' CRC32Cs,
// computed from the same buffers (concurrently with the writes for large
// extents) and combined into the trailer's payload CRC without another pass.
// It does not return before it has stopped reading the buffers.
func WriteExtent(f vfs.File, fd uintptr, name string, off uint64, l *Layout, chunk func(i int) []byte, lead func(crcs []uint32) ([]byte, error), id format.PacketID) ([]uint32, error) {
	crcs := make([]uint32, l.Chunks)
	crcDone := computeCRCs(crcs, chunk, l.Payload >= parallelCRCMin)
	err := writeChunks(f, fd, name, off, l, chunk)
	<-crcDone
	if err != nil {
		return nil, err
	}
	var crc uint32
	if l.Prefix > 0 {
		rec, err := lead(crcs)
		if err != nil {
			return nil, err
		}
		if uint64(len(rec)) > l.Prefix {
			return nil, fmt.Errorf("%w: extent's leading record of %d bytes exceeds its %d-byte prefix", ErrInvalidArgument, len(rec), l.Prefix)
		}
		p := make([]byte, l.Prefix)
		copy(p, rec)
		if err := WriteAt(f, name, p, off); err != nil {
			return nil, err
		}
		crc = CRC(p)
	}
	crc = CRCCombine(crc, PayloadCRC(l, crcs), l.Payload-l.Prefix)
	tail := make([]byte, l.Length-l.Payload)
	t := format.Trailer{Packet: id, Offset: off, PayloadLen: l.Payload, PayloadCRC: crc}
	copy(tail[len(tail)-format.TrailerSize:], t.Encode())
	if err := WriteAt(f, name, tail, off+l.Payload); err != nil {
		return nil, err
	}
	return crcs, nil
}

// computeCRCs fills crcs with the CRC32C of each of p's chunks, on another
// goroutine if async; the returned channel is closed when it is done.
func computeCRCs(crcs []uint32, chunk func(i int) []byte, async bool) <-chan struct{} {
	done := make(chan struct{})
	run := func() {
		for i := range crcs {
			crcs[i] = CRC(chunk(i))
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
func writeChunks(f vfs.File, fd uintptr, name string, off uint64, l *Layout, chunk func(i int) []byte) error {
	var zeros [format.ChunkAlignment]byte
	w := gatherWriter{f: f, fd: fd, name: name, at: off + l.Prefix}
	writeback, pending := true, uint64(0)
	for i := range l.Chunks {
		at := off + l.Rel(i)
		w.add(chunk(i))
		if pad := l.Pad(i); pad > 0 {
			w.add(zeros[:pad])
		}
		stride := l.Size(i) + l.Pad(i)
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
		w.err = WriteAt(w.f, w.name, b, w.at)
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

// PayloadCRC is the CRC32C of the chunks and the zero padding between
// them, derived from the chunks' CRCs: the payload's CRC when the extent
// has no prefix.
func PayloadCRC(l *Layout, crcs []uint32) uint32 {
	var zeros [format.ChunkAlignment]byte
	var crc uint32
	for i, c := range crcs {
		crc = CRCCombine(crc, c, l.Size(i))
		if pad := l.Pad(i); pad > 0 {
			crc = CRCCombine(crc, format.CRC(zeros[:pad]), pad)
		}
	}
	return crc
}

// WriteAt writes all of b at off of f, called name.
func WriteAt(f vfs.File, name string, b []byte, off uint64) error {
	n, err := f.WriteAt(b, int64(off))
	if err == nil && n != len(b) {
		err = fmt.Errorf("short write: %d of %d bytes", n, len(b))
	}
	if err != nil {
		return fmt.Errorf("store: write blob file %s at %d: %w", name, off, err)
	}
	return nil
}
