package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"unicode/utf8"

	"github.com/kvstore/kvstore/format"
)

// Limits on the JSON header, checked before (size) and while (entries,
// rank, offsets) it is parsed, so that a hostile header costs at most 4x
// MaxHeaderSize, never memory in proportion to what it claims. Upstream's
// size limit is 100 MB; kvstore's own files need far less (a KV packet's
// header is two tensors and about 30 metadata keys, an adapter's two
// tensors and a config), and a 100 MB header cost 890 MiB and 35 s to
// parse.
const (
	MaxHeaderSize      = 16 << 20 // bytes of JSON
	MaxTensors         = 1 << 16  // tensor entries
	MaxMetadataEntries = 1 << 12  // __metadata__ keys
	MaxRank            = 16       // dimensions of one tensor's shape
)

// metadataKey is the reserved header entry holding the string metadata.
const metadataKey = "__metadata__"

// Tensor is one named tensor. Data is little endian, row major.
type Tensor struct {
	Name  string
	DType DType
	Shape []uint64
	Data  []byte
	// streamed is the data's length when Data is nil and the data is
	// written apart (WriteKV): Header then lays the tensor out as if Data
	// held that many bytes.
	streamed uint64
}

// dataLen is the tensor's data length in the file.
func (t *Tensor) dataLen() uint64 {
	if t.Data == nil {
		return t.streamed
	}
	return uint64(len(t.Data))
}

// File is a decoded safetensors file. Tensors are in the order of their
// data in the buffer (Encode writes them in slice order).
type File struct {
	Tensors  []Tensor
	Metadata map[string]string
}

// Tensor returns the tensor called name, or nil.
func (f *File) Tensor(name string) *Tensor {
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			return &f.Tensors[i]
		}
	}
	return nil
}

// header is the parsed, validated JSON header: the tensors with their
// offsets in the buffer instead of data.
type header struct {
	tensors  []placed
	metadata map[string]string
}

// placed is a tensor without data and its data's offsets in the buffer.
type placed struct {
	name       string
	dtype      DType
	shape      []uint64
	begin, end uint64
}

func corrupt(f string, args ...any) error {
	return fmt.Errorf("%w: safetensors: %s", format.ErrCorruption, fmt.Sprintf(f, args...))
}

// Decode parses and validates a whole file held in b. The tensors' Data
// alias b.
func Decode(b []byte) (*File, error) {
	n, err := headerSize(b, uint64(len(b)))
	if err != nil {
		return nil, err
	}
	h, err := parseHeader(b[8:8+n], uint64(len(b))-8-n)
	if err != nil {
		return nil, err
	}
	return h.attach(b[8+n:]), nil
}

// Read parses and validates the file of size bytes behind r. The header is
// read and checked against size before the buffer is allocated and read, so
// a file that claims more than it holds costs nothing.
func Read(r io.ReaderAt, size int64) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: safetensors: negative file size", format.ErrInvalidArgument)
	}
	var pre [8]byte
	if size < 8 {
		return nil, corrupt("%d bytes: too short for the 8-byte header size", size)
	}
	if _, err := r.ReadAt(pre[:], 0); err != nil {
		return nil, readErr("header size", err)
	}
	n, err := headerSize(pre[:], uint64(size))
	if err != nil {
		return nil, err
	}
	hb := make([]byte, n)
	if _, err := r.ReadAt(hb, 8); err != nil {
		return nil, readErr("header", err)
	}
	h, err := parseHeader(hb, uint64(size)-8-n)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, uint64(size)-8-n)
	if len(buf) > 0 { // a ReaderAt may answer io.EOF to an empty read at the end
		if _, err := r.ReadAt(buf, int64(8+n)); err != nil {
			return nil, readErr("tensor data", err)
		}
	}
	return h.attach(buf), nil
}

func readErr(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt("file ends inside the %s", what)
	}
	return fmt.Errorf("safetensors: read %s: %w", what, err)
}

// headerSize reads N from the first 8 bytes of b and checks it against the
// cap and the file size.
func headerSize(b []byte, size uint64) (uint64, error) {
	if len(b) < 8 || size < 8 {
		return 0, corrupt("%d bytes: too short for the 8-byte header size", size)
	}
	n := binary.LittleEndian.Uint64(b)
	switch {
	case n > MaxHeaderSize:
		return 0, corrupt("header size %d exceeds the limit %d", n, MaxHeaderSize)
	case n > size-8:
		return 0, corrupt("header size %d exceeds the %d bytes after it", n, size-8)
	case n < 2:
		return 0, corrupt("header size %d: too short for a JSON object", n)
	}
	return n, nil
}

// parseHeader parses the JSON header and validates it against a buffer of
// bufLen bytes; the tensors' Data is attached afterwards.
func parseHeader(hb []byte, bufLen uint64) (*header, error) {
	if !utf8.Valid(hb) {
		return nil, corrupt("header is not valid UTF-8")
	}
	if hb[0] != '{' {
		return nil, corrupt("header does not start with '{'")
	}
	h, err := parseEntries(hb)
	if err != nil {
		return nil, err
	}
	return h, h.checkOffsets(bufLen)
}

// parseEntries walks the top-level object token by token (scanner),
// refusing duplicate names, more than MaxTensors tensors, and anything a
// tensor entry or the metadata may not hold as soon as it is met.
func parseEntries(hb []byte) (*header, error) {
	s := &scanner{b: hb}
	syntax := func(err error) error { return corrupt("header: %v", err) }
	if err := s.expect('{'); err != nil {
		return nil, syntax(err)
	}
	h := &header{}
	seenMeta := false
	for more := !s.next('}'); more; {
		name, err := s.str()
		if err != nil {
			return nil, syntax(err)
		}
		if err := s.expect(':'); err != nil {
			return nil, corrupt("header: entry %q: %v", name, err)
		}
		if name == metadataKey {
			if seenMeta {
				return nil, corrupt("duplicate entry %q", name)
			}
			seenMeta = true
			if h.metadata, err = parseMetadata(s); err != nil {
				return nil, err
			}
		} else {
			if len(h.tensors) == MaxTensors {
				return nil, corrupt("more than %d tensors", MaxTensors)
			}
			p, err := parseTensor(s, name)
			if err != nil {
				return nil, err
			}
			if len(h.tensors) == cap(h.tensors) {
				// Double up to the limit, so that the slices ever
				// allocated sum to twice the last, not append's 1.25x
				// steps' four times.
				grown := make([]placed, len(h.tensors), min(2*len(h.tensors)+4, MaxTensors))
				copy(grown, h.tensors)
				h.tensors = grown
			}
			h.tensors = append(h.tensors, p)
		}
		if more, err = s.more('}'); err != nil {
			return nil, syntax(err)
		}
	}
	if rest := hb[s.i:]; len(bytes.Trim(rest, " ")) != 0 {
		return nil, corrupt("header: %d bytes after the JSON object", len(rest))
	}
	// Duplicate names, found by sorting them rather than in a map: a
	// sixth of the memory at MaxTensors.
	names := make([]string, len(h.tensors))
	for i := range h.tensors {
		names[i] = h.tensors[i].name
	}
	slices.Sort(names)
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] {
			return nil, corrupt("duplicate entry %q", names[i])
		}
	}
	return h, nil
}

// parseMetadata reads the __metadata__ object: null, or string keys and
// values only, no key twice (encoding/json's map would keep the last
// silently), at most MaxMetadataEntries keys.
func parseMetadata(s *scanner) (map[string]string, error) {
	bad := func(f string, args ...any) error {
		return corrupt("%s: %s", metadataKey, fmt.Sprintf(f, args...))
	}
	if s.literal("null") { // no metadata, as upstream accepts
		return nil, nil
	}
	if s.peek() != '{' {
		return nil, bad("not an object")
	}
	s.i++
	meta := map[string]string{}
	for more := !s.next('}'); more; {
		if len(meta) == MaxMetadataEntries {
			return nil, bad("more than %d keys", MaxMetadataEntries)
		}
		key, err := s.str()
		if err != nil {
			return nil, bad("%v", err)
		}
		if err := s.expect(':'); err != nil {
			return nil, bad("key %q: %v", key, err)
		}
		if s.peek() != '"' {
			return nil, bad("key %q: value is not a string", key)
		}
		val, err := s.str()
		if err != nil {
			return nil, bad("key %q: %v", key, err)
		}
		if _, dup := meta[key]; dup {
			return nil, bad("duplicate key %q", key)
		}
		meta[key] = val
		if more, err = s.more('}'); err != nil {
			return nil, bad("%v", err)
		}
	}
	return meta, nil
}

// parseTensor reads one tensor entry and checks it: exactly the fields
// dtype, shape and data_offsets, each once; a known dtype; two offsets; at
// most MaxRank dimensions; and a length equal to the shape's product times
// the dtype size (checked arithmetic). Arrays are refused at the first
// element past their limit.
func parseTensor(s *scanner, name string) (placed, error) {
	bad := func(f string, args ...any) (placed, error) {
		return placed{}, corrupt("tensor %q: %s", name, fmt.Sprintf(f, args...))
	}
	if err := s.expect('{'); err != nil {
		return bad("%v", err)
	}
	const (
		hasDType = 1 << iota
		hasShape
		hasOffsets
	)
	var (
		dtype DType
		shape []uint64
		off   [2]uint64
		nOff  int
		got   int
		buf   [MaxRank]uint64
	)
	for more := !s.next('}'); more; {
		key, err := s.strBytes()
		if err == nil {
			err = s.expect(':')
		}
		if err != nil {
			return bad("%v", err)
		}
		var field int
		switch {
		case string(key) == "dtype":
			field = hasDType
			var d string
			if d, err = s.str(); err != nil {
				return bad("dtype: %v", err)
			}
			dtype = DType(d)
		case string(key) == "shape":
			field = hasShape
			var dims []uint64
			if dims, err = s.uints(buf[:]); err == nil {
				shape = slices.Clone(dims)
			} else if errors.Is(err, errTooLong) {
				return bad("rank exceeds %d", MaxRank)
			} else if err != nil {
				return bad("shape: %v", err)
			}
		case string(key) == "data_offsets":
			field = hasOffsets
			var o []uint64
			if o, err = s.uints(buf[:2]); err == nil {
				nOff = copy(off[:], o)
			} else if errors.Is(err, errTooLong) {
				return bad("data_offsets has more than 2 elements: want [begin, end]")
			} else if err != nil {
				return bad("data_offsets: %v", err)
			}
		default:
			return bad("unknown field %q", key)
		}
		if got&field != 0 {
			return bad("field %q given twice", key)
		}
		got |= field
		if more, err = s.more('}'); err != nil {
			return bad("%v", err)
		}
	}
	if got != hasDType|hasShape|hasOffsets {
		return bad("dtype, shape and data_offsets are required")
	}
	size := dtype.Size()
	if size == 0 {
		return bad("unknown dtype %q", dtype)
	}
	if nOff != 2 || off[0] > off[1] {
		return bad("data_offsets %v: want [begin, end] with begin <= end", slices.Clone(off[:nOff]))
	}
	n, ok := byteLen(shape, size)
	if !ok {
		return bad("shape %v of %s overflows", shape, dtype)
	}
	if n != off[1]-off[0] {
		return bad("shape %v of %s is %d bytes, data_offsets give %d", shape, dtype, n, off[1]-off[0])
	}
	return placed{name: name, dtype: dtype, shape: shape, begin: off[0], end: off[1]}, nil
}

// byteLen is product(shape) * size, false on overflow of uint64 or int.
func byteLen(shape []uint64, size int) (uint64, bool) {
	n := uint64(size)
	for _, d := range shape {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 {
			return 0, false
		}
		n = lo
	}
	return n, n <= uint64(maxInt)
}

const maxInt = int(^uint(0) >> 1)

// checkOffsets sorts the tensors by offset and requires them to be
// contiguous from 0 and to end exactly at bufLen.
func (h *header) checkOffsets(bufLen uint64) error {
	slices.SortStableFunc(h.tensors, func(a, b placed) int {
		if c := cmp.Compare(a.begin, b.begin); c != 0 {
			return c
		}
		return cmp.Compare(a.end, b.end)
	})
	var at uint64
	for _, p := range h.tensors {
		if p.begin != at {
			return corrupt("tensor %q: data_offsets start at %d, want %d (offsets must be contiguous from 0)",
				p.name, p.begin, at)
		}
		at = p.end
	}
	if at != bufLen {
		return corrupt("tensors cover %d bytes of a %d-byte buffer", at, bufLen)
	}
	return nil
}

// attach points each tensor's Data at its bytes in buf.
func (h *header) attach(buf []byte) *File {
	var tensors []Tensor
	if len(h.tensors) > 0 {
		tensors = make([]Tensor, len(h.tensors))
	}
	for i, p := range h.tensors {
		tensors[i] = Tensor{Name: p.name, DType: p.dtype, Shape: p.shape, Data: buf[p.begin:p.end:p.end]}
	}
	return &File{Tensors: tensors, Metadata: h.metadata}
}
