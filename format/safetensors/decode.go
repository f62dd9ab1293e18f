package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"unicode/utf8"

	"github.com/kvstore/kvstore/format"
)

// Limits on the JSON header, checked before (size) and while (entries,
// rank) it is parsed, so that a hostile header costs memory in proportion
// to MaxHeaderSize, never to what it claims. Upstream's size limit is
// 100 MB; kvstore's own files need far less (a KV packet's header is two
// tensors and about 30 metadata keys, an adapter's two tensors and a
// config), and a 100 MB header cost 890 MiB and 35 s to parse.
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

// entry is a tensor's header entry before validation.
type entry struct {
	DType       *DType    `json:"dtype"`
	Shape       *[]uint64 `json:"shape"`
	DataOffsets *[]uint64 `json:"data_offsets"`
}

// header is the parsed, validated JSON header; tensors carry their offsets
// in the buffer instead of data.
type header struct {
	tensors  []Tensor
	begin    []uint64
	end      []uint64
	metadata map[string]string
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
	if _, err := r.ReadAt(buf, int64(8+n)); err != nil {
		return nil, readErr("tensor data", err)
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
	h, ends, err := parseEntries(hb)
	if err != nil {
		return nil, err
	}
	return h, h.checkOffsets(ends, bufLen)
}

// parseEntries walks the top-level object, refusing duplicate names.
func parseEntries(hb []byte) (*header, []uint64, error) {
	dec := json.NewDecoder(bytes.NewReader(hb))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, nil, corrupt("header: %v", err)
	}
	h := &header{}
	var ends []uint64
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, corrupt("header: %v", err)
		}
		name, _ := tok.(string)
		if seen[name] {
			return nil, nil, corrupt("duplicate entry %q", name)
		}
		seen[name] = true
		if name == metadataKey {
			if h.metadata, err = parseMetadata(dec); err != nil {
				return nil, nil, err
			}
			continue
		}
		if len(h.tensors) == MaxTensors {
			return nil, nil, corrupt("more than %d tensors", MaxTensors)
		}
		var e entry
		if err := dec.Decode(&e); err != nil {
			return nil, nil, corrupt("tensor %q: %v", name, err)
		}
		t, begin, end, err := e.tensor(name)
		if err != nil {
			return nil, nil, err
		}
		h.tensors, h.begin, ends = append(h.tensors, t), append(h.begin, begin), append(ends, end)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, nil, corrupt("header: %v", err)
	}
	if rest := hb[dec.InputOffset():]; len(bytes.Trim(rest, " ")) != 0 {
		return nil, nil, corrupt("header: %d bytes after the JSON object", len(rest))
	}
	return h, ends, nil
}

// parseMetadata reads the __metadata__ object token by token: string keys
// and values only, no key twice (encoding/json's map would keep the last
// silently), at most MaxMetadataEntries keys.
func parseMetadata(dec *json.Decoder) (map[string]string, error) {
	bad := func(f string, args ...any) error {
		return corrupt("%s: %s", metadataKey, fmt.Sprintf(f, args...))
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, bad("%v", err)
	}
	if tok == nil { // null: no metadata, as upstream accepts
		return nil, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, bad("not an object")
	}
	meta := map[string]string{}
	for dec.More() {
		if len(meta) == MaxMetadataEntries {
			return nil, bad("more than %d keys", MaxMetadataEntries)
		}
		kt, err := dec.Token()
		if err != nil {
			return nil, bad("%v", err)
		}
		key, _ := kt.(string)
		vt, err := dec.Token()
		if err != nil {
			return nil, bad("key %q: %v", key, err)
		}
		val, ok := vt.(string)
		if !ok {
			return nil, bad("key %q: value is not a string", key)
		}
		if _, dup := meta[key]; dup {
			return nil, bad("duplicate key %q", key)
		}
		meta[key] = val
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, bad("%v", err)
	}
	return meta, nil
}

// tensor checks one entry: known dtype, two offsets, and a length equal to
// the shape's product times the dtype size (checked arithmetic).
func (e *entry) tensor(name string) (Tensor, uint64, uint64, error) {
	if e.DType == nil || e.Shape == nil || e.DataOffsets == nil {
		return Tensor{}, 0, 0, corrupt("tensor %q: dtype, shape and data_offsets are required", name)
	}
	size := e.DType.Size()
	if size == 0 {
		return Tensor{}, 0, 0, corrupt("tensor %q: unknown dtype %q", name, *e.DType)
	}
	off := *e.DataOffsets
	if len(off) != 2 || off[0] > off[1] {
		return Tensor{}, 0, 0, corrupt("tensor %q: data_offsets %v: want [begin, end] with begin <= end", name, off)
	}
	if len(*e.Shape) > MaxRank {
		return Tensor{}, 0, 0, corrupt("tensor %q: rank %d exceeds %d", name, len(*e.Shape), MaxRank)
	}
	n, ok := byteLen(*e.Shape, size)
	if !ok {
		return Tensor{}, 0, 0, corrupt("tensor %q: shape %v of %s overflows", name, *e.Shape, *e.DType)
	}
	if n != off[1]-off[0] {
		return Tensor{}, 0, 0, corrupt("tensor %q: shape %v of %s is %d bytes, data_offsets give %d",
			name, *e.Shape, *e.DType, n, off[1]-off[0])
	}
	return Tensor{Name: name, DType: *e.DType, Shape: *e.Shape}, off[0], off[1], nil
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
func (h *header) checkOffsets(ends []uint64, bufLen uint64) error {
	idx := make([]int, len(h.tensors))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := cmp.Compare(h.begin[a], h.begin[b]); c != 0 {
			return c
		}
		return cmp.Compare(ends[a], ends[b])
	})
	var at uint64
	tensors := make([]Tensor, len(idx))
	begin, end := make([]uint64, len(idx)), make([]uint64, len(idx))
	for j, i := range idx {
		if h.begin[i] != at {
			return corrupt("tensor %q: data_offsets start at %d, want %d (offsets must be contiguous from 0)",
				h.tensors[i].Name, h.begin[i], at)
		}
		at = ends[i]
		tensors[j], begin[j], end[j] = h.tensors[i], h.begin[i], ends[i]
	}
	if at != bufLen {
		return corrupt("tensors cover %d bytes of a %d-byte buffer", at, bufLen)
	}
	h.tensors, h.begin, h.end = tensors, begin, end
	return nil
}

// attach points each tensor's Data at its bytes in buf.
func (h *header) attach(buf []byte) *File {
	for i := range h.tensors {
		h.tensors[i].Data = buf[h.begin[i]:h.end[i]:h.end[i]]
	}
	return &File{Tensors: h.tensors, Metadata: h.metadata}
}
