package gguf

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"unicode/utf8"

	"github.com/kvstore/kvstore/format"
)

// Magic is the first four bytes of a GGUF file.
const Magic = "GGUF"

// Limits on what a file may declare. They are far above any real model's
// (a 150k-token vocabulary is one array of 150k strings) and bound what a
// hostile header can make the reader do; allocations are further bounded by
// the file's size.
const (
	MaxTensors = 1 << 20
	MaxKV      = 1 << 16
	MaxString  = 1 << 20 // bytes of one key, name or string value
	MaxArray   = 1 << 26 // elements of one array
	MaxDims    = 4       // ggml's GGML_MAX_DIMS
	// DefaultAlignment is the data alignment when general.alignment is absent.
	DefaultAlignment = 32
)

// File is a parsed GGUF header: its metadata in file order, its tensors and
// where their data starts.
type File struct {
	Version    uint32
	KV         []KV
	Tensors    []Tensor
	Alignment  uint64
	DataOffset uint64 // absolute offset of the data section
	Size       int64  // bytes of the whole file

	r io.ReaderAt
}

// Get returns the value of key, if present.
func (f *File) Get(key string) (Value, bool) {
	for _, kv := range f.KV {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return Value{}, false
}

// TensorData reads tensor i's bytes.
func (f *File) TensorData(i int) ([]byte, error) {
	t := &f.Tensors[i]
	b := make([]byte, t.Size())
	if _, err := f.r.ReadAt(b, int64(f.DataOffset+t.Offset)); err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	return b, nil
}

// Open reads the header of the GGUF file at path. The returned File keeps
// the file open for TensorData and Spec; Close it.
func Open(path string) (*File, func() error, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("gguf: %w", err)
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := Read(fd, st.Size())
	if err != nil {
		fd.Close()
		return nil, nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	return f, fd.Close, nil
}

// Parse reads a GGUF file held in memory.
func Parse(b []byte) (*File, error) { return Read(byteReaderAt(b), int64(len(b))) }

type byteReaderAt []byte

func (b byteReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Read parses the header of a GGUF file of size bytes and checks that the
// tensors lie in order inside it, each at the previous one's end padded to
// the alignment (as ggml requires). Errors wrap format.ErrCorruption.
func Read(r io.ReaderAt, size int64) (*File, error) {
	d := &decoder{r: r, size: size}
	f, err := d.file()
	if err != nil {
		return nil, fmt.Errorf("%w: gguf: at byte %d: %v", format.ErrCorruption, d.off, err)
	}
	f.r, f.Size = r, size
	return f, nil
}

// decoder reads little-endian fields through a small buffer, checking every
// count against the bytes left.
type decoder struct {
	r    io.ReaderAt
	size int64
	off  int64
	buf  [8]byte
}

func (d *decoder) left() int64 { return d.size - d.off }

func (d *decoder) read(n int) ([]byte, error) {
	if int64(n) > d.left() {
		return nil, fmt.Errorf("%d bytes wanted, %d left", n, d.left())
	}
	var b []byte
	if n <= len(d.buf) {
		b = d.buf[:n]
	} else {
		b = make([]byte, n)
	}
	if _, err := d.r.ReadAt(b, d.off); err != nil {
		return nil, err
	}
	d.off += int64(n)
	return b, nil
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.read(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.read(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a u64 count of elements of at least minSize bytes each and
// checks it against limit and the bytes left.
func (d *decoder) count(what string, limit uint64, minSize int64) (int, error) {
	n, err := d.u64()
	if err != nil {
		return 0, err
	}
	if n > limit || (minSize > 0 && n > uint64(d.left()/minSize)) {
		return 0, fmt.Errorf("%s count %d exceeds the limit %d or the %d bytes left", what, n, limit, d.left())
	}
	return int(n), nil
}

func (d *decoder) str() (string, error) {
	n, err := d.count("string byte", MaxString, 1)
	if err != nil {
		return "", err
	}
	b, err := d.read(n)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("string is not UTF-8")
	}
	return string(b), nil
}

func (d *decoder) file() (*File, error) {
	b, err := d.read(4)
	if err != nil {
		return nil, err
	}
	if string(b) != Magic {
		return nil, fmt.Errorf("magic %q, want %q", b, Magic)
	}
	f := &File{Alignment: DefaultAlignment}
	if f.Version, err = d.u32(); err != nil {
		return nil, err
	}
	if f.Version != 2 && f.Version != 3 {
		return nil, fmt.Errorf("version %d, this reader reads 2 and 3", f.Version)
	}
	// A tensor info takes at least 8+4+8+4+8 bytes, a KV 8+4+1.
	nt, err := d.count("tensor", MaxTensors, 0)
	if err != nil {
		return nil, err
	}
	nkv, err := d.count("kv", MaxKV, 13)
	if err != nil {
		return nil, err
	}
	if uint64(nt) > uint64(d.left()/32) {
		return nil, fmt.Errorf("%d tensors cannot fit in %d bytes", nt, d.left())
	}
	if err := d.kvs(f, nkv); err != nil {
		return nil, err
	}
	if err := d.tensors(f, nt); err != nil {
		return nil, err
	}
	return f, nil
}

func (d *decoder) kvs(f *File, n int) error {
	f.KV = make([]KV, 0, n)
	seen := make(map[string]bool, n)
	for range n {
		key, err := d.str()
		if err != nil {
			return fmt.Errorf("kv %d key: %v", len(f.KV), err)
		}
		if seen[key] {
			return fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		t, err := d.u32()
		if err != nil {
			return err
		}
		v, err := d.value(Type(t), true)
		if err != nil {
			return fmt.Errorf("key %q: %v", key, err)
		}
		if key == "general.alignment" {
			a, ok := v.Int()
			if !ok || v.Type != TypeUint32 || a <= 0 || a&(a-1) != 0 {
				return fmt.Errorf("general.alignment %v is not a u32 power of two", v)
			}
			f.Alignment = uint64(a)
		}
		f.KV = append(f.KV, KV{key, v})
	}
	return nil
}

func (d *decoder) value(t Type, arrays bool) (Value, error) {
	switch sz := t.size(); {
	case sz > 0:
		b, err := d.read(sz)
		if err != nil {
			return Value{}, err
		}
		return Value{Type: t, bits: scalarBits(t, b)}, nil
	case t == TypeString:
		s, err := d.str()
		return Value{Type: t, str: s}, err
	case t == TypeArray && arrays:
		return d.array()
	}
	return Value{}, fmt.Errorf("value type %v not allowed here", t)
}

func (d *decoder) array() (Value, error) {
	et, err := d.u32()
	if err != nil {
		return Value{}, err
	}
	t := Type(et)
	if t.size() < 0 || t == TypeArray {
		return Value{}, fmt.Errorf("array of %v", t)
	}
	minSize := int64(max(t.size(), 8)) // a string takes its 8-byte length
	n, err := d.count("array element", MaxArray, minSize)
	if err != nil {
		return Value{}, err
	}
	v := Value{Type: TypeArray, Elem: t}
	if t == TypeString {
		v.strs = make([]string, n)
		for i := range v.strs {
			if v.strs[i], err = d.str(); err != nil {
				return Value{}, err
			}
		}
		return v, nil
	}
	v.arr = make([]uint64, n)
	for i := range v.arr {
		e, err := d.value(t, false)
		if err != nil {
			return Value{}, err
		}
		v.arr[i] = e.bits
	}
	return v, nil
}

// scalarBits widens a scalar's bytes: signed types sign-extended.
func scalarBits(t Type, b []byte) uint64 {
	switch t {
	case TypeUint8, TypeBool:
		return uint64(b[0])
	case TypeInt8:
		return uint64(int64(int8(b[0])))
	case TypeUint16:
		return uint64(binary.LittleEndian.Uint16(b))
	case TypeInt16:
		return uint64(int64(int16(binary.LittleEndian.Uint16(b))))
	case TypeUint32, TypeFloat32:
		return uint64(binary.LittleEndian.Uint32(b))
	case TypeInt32:
		return uint64(int64(int32(binary.LittleEndian.Uint32(b))))
	}
	return binary.LittleEndian.Uint64(b)
}

func (d *decoder) tensors(f *File, n int) error {
	f.Tensors = make([]Tensor, 0, n)
	seen := make(map[string]bool, n)
	for range n {
		t, err := d.tensor()
		if err != nil {
			return fmt.Errorf("tensor %d: %v", len(f.Tensors), err)
		}
		if seen[t.Name] {
			return fmt.Errorf("tensor %q appears twice", t.Name)
		}
		seen[t.Name] = true
		f.Tensors = append(f.Tensors, t)
	}
	data := uint64(d.off)
	data += (f.Alignment - data%f.Alignment) % f.Alignment
	if data > uint64(d.size) {
		return fmt.Errorf("data section at %d past the end (%d bytes)", data, d.size)
	}
	f.DataOffset = data
	// As ggml requires: tensors in order, each where the last one ended,
	// padded to the alignment. So no two overlap and the data section
	// re-encodes to the same size.
	room := uint64(d.size) - data
	var next uint64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		size, err := t.check()
		if err != nil {
			return err
		}
		if t.Offset != next || size > room || t.Offset > room-size {
			return fmt.Errorf("tensor %q: %d bytes at data offset %d: want offset %d and at most %d data bytes", t.Name, size, t.Offset, next, room)
		}
		next = t.Offset + size
		next += (f.Alignment - next%f.Alignment) % f.Alignment
	}
	return nil
}

func (d *decoder) tensor() (Tensor, error) {
	var t Tensor
	var err error
	if t.Name, err = d.str(); err != nil {
		return t, err
	}
	nd, err := d.u32()
	if err != nil {
		return t, err
	}
	if nd == 0 || nd > MaxDims {
		return t, fmt.Errorf("tensor %q: %d dims not in [1, %d]", t.Name, nd, MaxDims)
	}
	t.Dims = make([]uint64, nd)
	for i := range t.Dims {
		if t.Dims[i], err = d.u64(); err != nil {
			return t, err
		}
	}
	ty, err := d.u32()
	if err != nil {
		return t, err
	}
	t.Type = GGMLType(ty)
	if t.Offset, err = d.u64(); err != nil {
		return t, err
	}
	if t.Offset > math.MaxInt64 {
		return t, fmt.Errorf("tensor %q: offset %d", t.Name, t.Offset)
	}
	return t, nil
}
