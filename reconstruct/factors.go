package reconstruct

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// Factors is a truncated SVD A ~ U diag(S) Vt of a Rows x Cols matrix (one
// span's keys or values in one (layer, KV head): Rows tokens, Cols head
// dims). Component i is S[i] times column i of U times row i of Vt.
type Factors struct {
	Rows, Cols, Rank int
	U                []float32 // Rows*Rank, row-major: U[t*Rank+i]
	S                []float32 // Rank singular values, >= 0
	Vt               []float32 // Rank*Cols, row-major: Vt[i*Cols+j]
}

// Validate checks shapes and that every element is finite and every
// singular value non-negative. Errors wrap format.ErrInvalidArgument.
func (f *Factors) Validate() error { return (*format.Factors)(f).Validate() }

// Truncate returns a copy holding the first r components (all of them when
// r >= Rank).
func (f *Factors) Truncate(r int) *Factors {
	r = max(0, min(r, f.Rank))
	g := &Factors{Rows: f.Rows, Cols: f.Cols, Rank: r,
		U: make([]float32, f.Rows*r), S: append([]float32(nil), f.S[:r]...),
		Vt: append([]float32(nil), f.Vt[:r*f.Cols]...)}
	for t := 0; t < f.Rows; t++ {
		copy(g.U[t*r:(t+1)*r], f.U[t*f.Rank:t*f.Rank+r])
	}
	return g
}

// Gated applies per-component gates m (one per component, finite, >= 0):
// each S[i] becomes float32(m[i]*S[i]) and components gated to 0 are
// dropped, so that what is stored and sent shrinks. Reconstructing the
// result without gates gives exactly the bits of reconstructing f with
// them. Errors wrap format.ErrInvalidArgument.
func (f *Factors) Gated(m []float32) (*Factors, error) {
	if err := checkGates(m, f.Rank); err != nil {
		return nil, err
	}
	keep := make([]int, 0, f.Rank)
	for i, g := range m {
		if g != 0 {
			keep = append(keep, i)
		}
	}
	r := len(keep)
	g := &Factors{Rows: f.Rows, Cols: f.Cols, Rank: r,
		U: make([]float32, f.Rows*r), S: make([]float32, r), Vt: make([]float32, r*f.Cols)}
	for k, i := range keep {
		g.S[k] = m[i] * f.S[i]
		copy(g.Vt[k*f.Cols:(k+1)*f.Cols], f.Vt[i*f.Cols:(i+1)*f.Cols])
		for t := 0; t < f.Rows; t++ {
			g.U[t*r+k] = f.U[t*f.Rank+i]
		}
	}
	return g, nil
}

func checkGates(m []float32, rank int) error {
	if len(m) != rank {
		return fmt.Errorf("%w: %d gates for rank %d", format.ErrInvalidArgument, len(m), rank)
	}
	for i, g := range m {
		if !(g >= 0) || math.IsInf(float64(g), 1) {
			return fmt.Errorf("%w: gate %d is %v, want finite and >= 0", format.ErrInvalidArgument, i, g)
		}
	}
	return nil
}

// The factor encoding ("KVSF") is drawn and coded in format/factors.go;
// these names keep it reachable from the package that computes factors.
const (
	// FactorHeaderSize is the size of the descriptor before U.
	FactorHeaderSize = format.FactorHeaderSize
	maxFactorCols    = format.MaxFactorCols
)

// FactorLayout is the shape and dtype of encoded factors.
type FactorLayout = format.FactorLayout

// AppendFactors appends the encoding of f in dtype dt (f32, f16 or bf16,
// rounded to nearest even) to dst. Errors wrap format.ErrInvalidArgument:
// invalid factors, a non-float dtype, or a value beyond f16's range.
func AppendFactors(dst []byte, f *Factors, dt format.DType) ([]byte, error) {
	return format.AppendFactors(dst, (*format.Factors)(f), dt)
}

// ParseFactorLayout reads and checks the descriptor of an encoding, and
// that b is exactly as long as it says. Errors wrap format.ErrCorruption.
func ParseFactorLayout(b []byte) (FactorLayout, error) { return format.ParseFactorLayout(b) }

// DecodeFactors decodes an encoding made by AppendFactors (widening to
// float32 exactly) and returns the factors and the stored dtype. Bad bytes
// give an error wrapping format.ErrCorruption, never a panic; sizes are
// checked against len(b) before anything is allocated.
func DecodeFactors(b []byte) (*Factors, format.DType, error) {
	f, dt, err := format.DecodeFactors(b)
	return (*Factors)(f), dt, err
}
