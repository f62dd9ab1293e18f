package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/kvstore/kvstore/format"
)

func invalid(f string, args ...any) error {
	return fmt.Errorf("%w: safetensors: %s", format.ErrInvalidArgument, fmt.Sprintf(f, args...))
}

// Header returns the 8-byte size and the JSON header of f, padded with
// spaces so that the buffer starts 8-byte aligned, as upstream writes it.
// Tensors are laid out in slice order; metadata keys in sorted order.
func (f *File) Header() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{")
	for k, v := range f.Metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, invalid("metadata %q: not valid UTF-8", k)
		}
	}
	if len(f.Metadata) > 0 {
		m, err := json.Marshal(f.Metadata) // sorted keys
		if err != nil {
			return nil, invalid("metadata: %v", err)
		}
		b.WriteString(`"` + metadataKey + `":`)
		b.Write(m)
	}
	seen := map[string]bool{}
	var at uint64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if err := t.check(seen); err != nil {
			return nil, err
		}
		if b.Len() > 1 {
			b.WriteString(",")
		}
		name, _ := json.Marshal(t.Name)
		b.Write(name)
		fmt.Fprintf(&b, `:{"dtype":%s,"shape":%s,"data_offsets":[%d,%d]}`,
			strconv.Quote(string(t.DType)), shapeJSON(t.Shape), at, at+t.dataLen())
		at += t.dataLen()
	}
	b.WriteString("}")
	for (8+b.Len())%8 != 0 {
		b.WriteByte(' ')
	}
	if b.Len() > MaxHeaderSize {
		return nil, invalid("header of %d bytes exceeds %d", b.Len(), MaxHeaderSize)
	}
	out := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+b.Len()), uint64(b.Len()))
	return append(out, b.Bytes()...), nil
}

// check validates a tensor before it is written.
func (t *Tensor) check(seen map[string]bool) error {
	switch {
	case !utf8.ValidString(t.Name):
		return invalid("tensor name %q is not valid UTF-8", t.Name)
	case t.Name == metadataKey:
		return invalid("tensor name %q is reserved", t.Name)
	case seen[t.Name]:
		return invalid("duplicate tensor name %q", t.Name)
	case t.DType.Size() == 0:
		return invalid("tensor %q: unknown dtype %q", t.Name, t.DType)
	}
	seen[t.Name] = true
	n, ok := byteLen(t.Shape, t.DType.Size())
	if !ok || n != t.dataLen() {
		return invalid("tensor %q: shape %v of %s needs %d bytes, data has %d", t.Name, t.Shape, t.DType, n, t.dataLen())
	}
	return nil
}

func shapeJSON(s []uint64) string {
	b := []byte{'['}
	for i, d := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, d, 10)
	}
	return string(append(b, ']'))
}

// WriteTo writes f as a safetensors file.
func (f *File) WriteTo(w io.Writer) (int64, error) {
	h, err := f.Header()
	if err != nil {
		return 0, err
	}
	n, err := w.Write(h)
	total := int64(n)
	for i := 0; err == nil && i < len(f.Tensors); i++ {
		n, err = w.Write(f.Tensors[i].Data)
		total += int64(n)
	}
	return total, err
}

// Encode returns f as a safetensors file in memory.
func Encode(f *File) ([]byte, error) {
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
