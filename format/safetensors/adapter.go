package safetensors

import (
	"math"

	"github.com/kvstore/kvstore/format"
)

// A KV Packet adapter as the reference code saves it: two tensors of soft
// tokens at the input-embedding layer and the training config.
//
//	"header"   [N_h, hidden]  (or [1, N_h, hidden])  F32, BF16 or F16
//	"trailer"  [N_t, hidden]  (or [1, N_t, hidden])  same dtype
//	__metadata__ {"train_config": "<JSON>", ...}    every key kept
//
// N_h or N_t may be 0. No other tensor is allowed.
const (
	NameHeader      = "header"
	NameTrailer     = "trailer"
	MetaTrainConfig = "train_config"
)

// Adapter is a KV Packet adapter's soft tokens in float32.
type Adapter struct {
	Hidden int // width of each row: the model's embedding width
	// Header and Trailer are [rows][Hidden], flat.
	Header, Trailer []float32
	// Metadata is the file's __metadata__, MetaTrainConfig included (the
	// training config as JSON, free form).
	Metadata map[string]string
}

// EncodeAdapter lays a out as a File in dtype F32 or BF16 (rounded to
// nearest even). Rows that do not fit Hidden, a non-positive Hidden or
// another dtype are format.ErrInvalidArgument.
func EncodeAdapter(a *Adapter, dt DType) (*File, error) {
	var fdt format.DType
	switch dt {
	case F32:
		fdt = format.DTypeF32
	case BF16:
		fdt = format.DTypeBF16
	default:
		return nil, invalid("adapter: dtype %q, want F32 or BF16", dt)
	}
	if a.Hidden <= 0 || len(a.Header)%a.Hidden != 0 || len(a.Trailer)%a.Hidden != 0 {
		return nil, invalid("adapter: header of %d and trailer of %d values for hidden %d", len(a.Header), len(a.Trailer), a.Hidden)
	}
	f := &File{Metadata: a.Metadata}
	for _, t := range []struct {
		name string
		x    []float32
	}{{NameHeader, a.Header}, {NameTrailer, a.Trailer}} {
		b := make([]byte, len(t.x)*fdt.Size())
		if err := format.FromF32(b, t.x, fdt); err != nil {
			return nil, invalid("adapter: %s: %v", t.name, err)
		}
		f.Tensors = append(f.Tensors, Tensor{Name: t.name, DType: dt, Shape: []uint64{uint64(len(t.x) / a.Hidden), uint64(a.Hidden)}, Data: b})
	}
	return f, nil
}

// DecodeAdapter reads an adapter from f: both tensors present, of one
// float dtype (F32, BF16 or F16) and one hidden width, finite values, and
// nothing else. Anything else is format.ErrCorruption. The adapter's
// slices are fresh; Metadata is f's map.
func DecodeAdapter(f *File) (*Adapter, error) {
	h, t := f.Tensor(NameHeader), f.Tensor(NameTrailer)
	switch {
	case h == nil || t == nil:
		return nil, corrupt("adapter: needs tensors %q and %q", NameHeader, NameTrailer)
	case len(f.Tensors) != 2:
		return nil, corrupt("adapter: %d tensors, want %q and %q only", len(f.Tensors), NameHeader, NameTrailer)
	case h.DType != t.DType:
		return nil, corrupt("adapter: header is %s, trailer %s", h.DType, t.DType)
	}
	a := &Adapter{Metadata: f.Metadata}
	var err error
	var hh, th int
	if a.Header, hh, err = adapterRows(h); err != nil {
		return nil, err
	}
	if a.Trailer, th, err = adapterRows(t); err != nil {
		return nil, err
	}
	if hh != th {
		return nil, corrupt("adapter: header rows are %d wide, trailer rows %d", hh, th)
	}
	a.Hidden = hh
	return a, nil
}

// adapterRows decodes one [N, hidden] or [1, N, hidden] float tensor.
func adapterRows(t *Tensor) ([]float32, int, error) {
	shape := t.Shape
	if len(shape) == 3 && shape[0] == 1 {
		shape = shape[1:]
	}
	if len(shape) != 2 || shape[1] == 0 || shape[1] > math.MaxInt32 || shape[0] > math.MaxInt32 {
		return nil, 0, corrupt("adapter: tensor %s has shape %v, want [N, hidden] or [1, N, hidden]", t.Name, t.Shape)
	}
	var fdt format.DType
	switch t.DType {
	case F32:
		fdt = format.DTypeF32
	case BF16:
		fdt = format.DTypeBF16
	case F16:
		fdt = format.DTypeF16
	default:
		return nil, 0, corrupt("adapter: tensor %s is %s, want F32, BF16 or F16", t.Name, t.DType)
	}
	if n, ok := byteLen(shape, fdt.Size()); !ok || n != uint64(len(t.Data)) {
		return nil, 0, corrupt("adapter: tensor %s: %d bytes for shape %v of %s", t.Name, len(t.Data), t.Shape, t.DType)
	}
	x := make([]float32, len(t.Data)/fdt.Size())
	if err := format.ToF32(x, t.Data, fdt); err != nil {
		return nil, 0, corrupt("adapter: tensor %s: %v", t.Name, err)
	}
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, 0, corrupt("adapter: tensor %s: value %d is %v", t.Name, i, v)
		}
	}
	return x, int(shape[1]), nil
}
