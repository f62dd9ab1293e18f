package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/kvstore/kvstore/format"
)

// TensorData is a tensor to write: its description (Offset is ignored and
// assigned) and its bytes, which must be exactly Size bytes.
type TensorData struct {
	Tensor
	Data []byte
}

// Write writes a GGUF version 3 file: the metadata in the order given, the
// tensors in the order given, each aligned to general.alignment (a u32 in
// kv) or DefaultAlignment. Bad arguments are format.ErrInvalidArgument.
func Write(w io.Writer, kv []KV, tensors []TensorData) error {
	align := uint64(DefaultAlignment)
	for _, e := range kv {
		if e.Key == "general.alignment" {
			a, ok := e.Value.Int()
			if !ok || e.Value.Type != TypeUint32 || a <= 0 || a&(a-1) != 0 {
				return fmt.Errorf("%w: gguf: general.alignment is not a u32 power of two", format.ErrInvalidArgument)
			}
			align = uint64(a)
		}
	}
	e := &encoder{w: bufio.NewWriterSize(w, 1<<20)}
	e.bytes([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kv)))
	for _, x := range kv {
		e.str(x.Key)
		e.value(x.Value)
	}
	var off uint64
	for i := range tensors {
		t := &tensors[i]
		size, err := t.check()
		if err != nil {
			return fmt.Errorf("%w: gguf: %v", format.ErrInvalidArgument, err)
		}
		if uint64(len(t.Data)) != size {
			return fmt.Errorf("%w: gguf: tensor %q: %d bytes, its dims and type need %d", format.ErrInvalidArgument, t.Name, len(t.Data), size)
		}
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(off)
		off += size
		off += (align - off%align) % align
	}
	e.pad(align)
	for i := range tensors {
		e.bytes(tensors[i].Data)
		e.pad(align)
	}
	if e.err != nil {
		return fmt.Errorf("gguf: write: %w", e.err)
	}
	if err := e.w.Flush(); err != nil {
		return fmt.Errorf("gguf: write: %w", err)
	}
	return nil
}

type encoder struct {
	w   *bufio.Writer
	n   uint64
	err error
	b   [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
		e.n += uint64(len(b))
	}
}

func (e *encoder) u32(v uint32) { binary.LittleEndian.PutUint32(e.b[:], v); e.bytes(e.b[:4]) }
func (e *encoder) u64(v uint64) { binary.LittleEndian.PutUint64(e.b[:], v); e.bytes(e.b[:8]) }
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.bytes([]byte(s)) }

func (e *encoder) pad(align uint64) {
	var zero [64]byte
	for p := (align - e.n%align) % align; p > 0; {
		k := min(p, uint64(len(zero)))
		e.bytes(zero[:k])
		p -= k
	}
}

func (e *encoder) scalar(t Type, bits uint64) {
	binary.LittleEndian.PutUint64(e.b[:], bits)
	e.bytes(e.b[:t.size()])
}

func (e *encoder) value(v Value) {
	if v.Type.size() < 0 || (v.Type == TypeArray && (v.Elem.size() < 0 || v.Elem == TypeArray)) {
		if e.err == nil {
			e.err = fmt.Errorf("%w: value type %v of %v", format.ErrInvalidArgument, v.Type, v.Elem)
		}
		return
	}
	e.u32(uint32(v.Type))
	switch {
	case v.Type == TypeString:
		e.str(v.str)
	case v.Type == TypeArray:
		e.u32(uint32(v.Elem))
		if v.Elem == TypeString {
			e.u64(uint64(len(v.strs)))
			for _, s := range v.strs {
				e.str(s)
			}
			return
		}
		e.u64(uint64(len(v.arr)))
		for _, b := range v.arr {
			e.scalar(v.Elem, b)
		}
	default:
		e.scalar(v.Type, v.bits)
	}
}

// Reencode writes f again, its tensors' bytes read from the file it was
// parsed from: the round trip the fuzz target checks.
func Reencode(f *File) ([]byte, error) {
	ts := make([]TensorData, len(f.Tensors))
	for i := range f.Tensors {
		b, err := f.TensorData(i)
		if err != nil {
			return nil, err
		}
		ts[i] = TensorData{Tensor: f.Tensors[i], Data: b}
	}
	var buf bytes.Buffer
	if err := Write(&buf, f.KV, ts); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
