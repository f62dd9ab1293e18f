package format

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Factor encoding ("KVSF"), the bytes of one span's truncated SVD factors
// of its keys or values in one (layer, KV head): a 16-byte descriptor,
// then U, S and Vt, each contiguous, every element in the descriptor's
// dtype (f32, f16 or bf16), little endian:
//
//	+--------+----------+----------+----------+----------+--------------+
//	| "KVSF" | rows u32 | cols u16 | rank u16 | dtype u8 | 3 zero bytes |
//	+--------+----------+----------+----------+----------+--------------+
//	0        4          8          10         12         13             16
//	+---------------------------------------------------------------------+
//	| U: rows*rank (row-major) | S: rank | Vt: rank*cols (row-major)      |
//	+---------------------------------------------------------------------+
//
// The arrays start at byte 16, so a 16-byte-aligned buffer can be handed to
// a kernel as is; FactorLayout gives their offsets. There is no checksum:
// the store frames and checksums factors (span head records carry each
// block's CRC32C).
const (
	factorsMagic = "KVSF"
	// FactorHeaderSize is the size of the descriptor before U.
	FactorHeaderSize = 16
	// MaxFactorCols is the widest matrix factored: a head dimension.
	MaxFactorCols = MaxHeadDim
)

// Factors is the decoded form of a "KVSF" encoding, field for field
// reconstruct.Factors: A ~ U diag(S) Vt of a Rows x Cols matrix.
type Factors struct {
	Rows, Cols, Rank int
	U                []float32 // Rows*Rank, row-major: U[t*Rank+i]
	S                []float32 // Rank singular values, >= 0
	Vt               []float32 // Rank*Cols, row-major: Vt[i*Cols+j]
}

// Validate checks shapes and that every element is finite and every
// singular value non-negative. Errors wrap ErrInvalidArgument.
func (f *Factors) Validate() error {
	switch {
	case f.Rows < 1 || f.Cols < 1 || f.Rank < 0 || f.Rank > min(f.Rows, f.Cols):
		return fmt.Errorf("%w: factors: %dx%d of rank %d", ErrInvalidArgument, f.Rows, f.Cols, f.Rank)
	case len(f.U) != f.Rows*f.Rank || len(f.S) != f.Rank || len(f.Vt) != f.Rank*f.Cols:
		return fmt.Errorf("%w: factors: %dx%d rank %d with |U|=%d |S|=%d |Vt|=%d",
			ErrInvalidArgument, f.Rows, f.Cols, f.Rank, len(f.U), len(f.S), len(f.Vt))
	case !allFinite(f.U) || !allFinite(f.Vt) || !allFinite(f.S):
		return fmt.Errorf("%w: factors: non-finite element", ErrInvalidArgument)
	}
	for i, s := range f.S {
		if s < 0 {
			return fmt.Errorf("%w: factors: singular value %d is %v < 0", ErrInvalidArgument, i, s)
		}
	}
	return nil
}

func allFinite(x []float32) bool {
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}

// FactorLayout is the shape and dtype of encoded factors.
type FactorLayout struct {
	Rows, Cols, Rank int
	DType            DType
}

// UOffset, SOffset and VtOffset are the byte offsets of the three arrays in
// an encoding; Size is its total length.
func (l FactorLayout) UOffset() int  { return FactorHeaderSize }
func (l FactorLayout) SOffset() int  { return l.UOffset() + l.Rows*l.Rank*l.DType.Size() }
func (l FactorLayout) VtOffset() int { return l.SOffset() + l.Rank*l.DType.Size() }
func (l FactorLayout) Size() int     { return l.VtOffset() + l.Rank*l.Cols*l.DType.Size() }

// check validates the layout's fields; sizes cannot overflow once it passes.
func (l FactorLayout) check() error {
	if !l.DType.Float() || l.Rows < 1 || uint64(l.Rows) > math.MaxUint32 || l.Cols < 1 || l.Cols > MaxFactorCols ||
		l.Rank < 0 || l.Rank > min(l.Rows, l.Cols) {
		return fmt.Errorf("factors %dx%d of rank %d in %v", l.Rows, l.Cols, l.Rank, l.DType)
	}
	elems := (uint64(l.Rows) + 1 + uint64(l.Cols)) * uint64(l.Rank)
	if elems*uint64(l.DType.Size()) > math.MaxInt-FactorHeaderSize { // 32-bit platforms
		return fmt.Errorf("factors %dx%d of rank %d in %v do not fit in memory", l.Rows, l.Cols, l.Rank, l.DType)
	}
	return nil
}

// AppendFactors appends the encoding of f in dtype dt (f32, f16 or bf16,
// rounded to nearest even) to dst. Errors wrap ErrInvalidArgument: invalid
// factors, a non-float dtype, or a value beyond f16's range.
func AppendFactors(dst []byte, f *Factors, dt DType) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	l := FactorLayout{Rows: f.Rows, Cols: f.Cols, Rank: f.Rank, DType: dt}
	if err := l.check(); err != nil {
		return nil, fmt.Errorf("%w: append %v", ErrInvalidArgument, err)
	}
	start := len(dst)
	dst = append(dst, make([]byte, l.Size())...)
	b := dst[start:]
	copy(b, factorsMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(l.Rows))
	binary.LittleEndian.PutUint16(b[8:], uint16(l.Cols))
	binary.LittleEndian.PutUint16(b[10:], uint16(l.Rank))
	b[12] = byte(dt)
	for _, part := range []struct {
		off int
		src []float32
	}{{l.UOffset(), f.U}, {l.SOffset(), f.S}, {l.VtOffset(), f.Vt}} {
		out := b[part.off : part.off+len(part.src)*dt.Size()]
		if err := FromF32(out, part.src, dt); err != nil {
			return nil, err
		}
	}
	if dt == DTypeF16 && !f16Finite(b[FactorHeaderSize:]) {
		return nil, fmt.Errorf("%w: append factors: a value overflows f16; store them as bf16 or f32", ErrInvalidArgument)
	}
	return dst, nil
}

// f16Finite reports whether no f16 element of b is infinite or NaN.
func f16Finite(b []byte) bool {
	for i := 0; i+1 < len(b); i += 2 {
		if binary.LittleEndian.Uint16(b[i:])&0x7c00 == 0x7c00 {
			return false
		}
	}
	return true
}

// ParseFactorLayout reads and checks the descriptor of an encoding, and
// that b is exactly as long as it says. Errors wrap ErrCorruption.
func ParseFactorLayout(b []byte) (FactorLayout, error) {
	if len(b) < FactorHeaderSize || string(b[:4]) != factorsMagic {
		return FactorLayout{}, fmt.Errorf("%w: factors: %d bytes without the %q descriptor", ErrCorruption, len(b), factorsMagic)
	}
	l := FactorLayout{
		Rows:  int(binary.LittleEndian.Uint32(b[4:])),
		Cols:  int(binary.LittleEndian.Uint16(b[8:])),
		Rank:  int(binary.LittleEndian.Uint16(b[10:])),
		DType: DType(b[12]),
	}
	if err := l.check(); err != nil {
		return FactorLayout{}, fmt.Errorf("%w: %v", ErrCorruption, err)
	}
	if b[13]|b[14]|b[15] != 0 {
		return FactorLayout{}, fmt.Errorf("%w: factors: reserved descriptor bytes %x", ErrCorruption, b[13:16])
	}
	if len(b) != l.Size() {
		return FactorLayout{}, fmt.Errorf("%w: factors %dx%d rank %d %v: %d bytes, want %d",
			ErrCorruption, l.Rows, l.Cols, l.Rank, l.DType, len(b), l.Size())
	}
	return l, nil
}

// DecodeFactors decodes an encoding made by AppendFactors (widening to
// float32 exactly) and returns the factors and the stored dtype. Bad bytes
// give an error wrapping ErrCorruption, never a panic; sizes are checked
// against len(b) before anything is allocated.
func DecodeFactors(b []byte) (*Factors, DType, error) {
	l, err := ParseFactorLayout(b)
	if err != nil {
		return nil, 0, err
	}
	f := &Factors{Rows: l.Rows, Cols: l.Cols, Rank: l.Rank,
		U: make([]float32, l.Rows*l.Rank), S: make([]float32, l.Rank), Vt: make([]float32, l.Rank*l.Cols)}
	for _, part := range []struct {
		off int
		dst []float32
	}{{l.UOffset(), f.U}, {l.SOffset(), f.S}, {l.VtOffset(), f.Vt}} {
		if err := ToF32(part.dst, b[part.off:part.off+len(part.dst)*l.DType.Size()], l.DType); err != nil {
			return nil, 0, fmt.Errorf("%w: factors: %v", ErrCorruption, err)
		}
	}
	if err := f.Validate(); err != nil {
		return nil, 0, fmt.Errorf("%w: decoded %v", ErrCorruption, err)
	}
	return f, l.DType, nil
}
