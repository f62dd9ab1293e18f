package reconstruct

import (
	"fmt"
	"sync"

	"github.com/kvstore/kvstore/format"
)

// Unapply undoes r.Apply(x, pos) on one head vector in place: it divides
// the rotated dimensions by AttentionScale (YaRN's factor; nothing is done
// for other scalings), then rotates by -pos. Use it to turn post-RoPE keys
// back into the pre-RoPE keys that SVD factors are taken of. The round trip
// is exact up to float32 rounding (a few ulps of the pair's norm). It
// panics if len(x) != r.HeadDim(), like Apply.
func Unapply(r *RoPE, x []float32, pos int64) {
	if scale := r.AttentionScale(); scale != 1 {
		for j := range x[:r.Rotary()] {
			x[j] /= scale
		}
	}
	r.Rotate(x, -pos)
}

// ReconstructInto writes the low-rank rows K^ = sum_i m_i sigma_i u_i v_i^T
// of f into dst (f.Rows x f.Cols float32, row-major). gates holds m, one
// per component, or is nil for all ones. When rope is non-nil (keys) each
// row t is then rope.Apply'd at positions[t], in the same pass; values pass
// rope and positions nil.
//
// The arithmetic is defined exactly, so that a GPU kernel can match it bit
// for bit. All of it is IEEE binary32 with round-to-nearest-even, each
// product and each sum rounded on its own (no fused multiply-add; in CUDA,
// __fmul_rn and __fadd_rn):
//
//	w[i] = S[i] if gates is nil, else gates[i] * S[i]
//	for each row t, c[i] = w[i] * U[t*Rank+i]
//	for each column j, acc = +0; for i = 0, 1, ..., Rank-1: acc = acc + c[i]*Vt[i*Cols+j]
//	row t, column j is acc; then rope.Apply(row t, positions[t]) (RoPE's own fixed arithmetic)
//
// Rank 0 gives rows of +0. Errors wrap format.ErrInvalidArgument: shapes
// that do not agree, gates of the wrong count or not finite and >= 0, a
// RoPE of another head dim or a positions slice not of Rows.
func ReconstructInto(dst []float32, f *Factors, gates []float32, rope *RoPE, positions []int64) error {
	if err := reconstructCheck(f, gates, rope, positions); err != nil {
		return err
	}
	if len(dst) != f.Rows*f.Cols {
		return fmt.Errorf("%w: reconstruct: dst of %d floats for %dx%d", format.ErrInvalidArgument, len(dst), f.Rows, f.Cols)
	}
	w := lowrankWeights(f, gates)
	cp := lowrankScratch(min(f.Rows, lowrankChunk) * f.Rank)
	defer lowrankPool.Put(cp)
	c := *cp
	for t0 := 0; t0 < f.Rows; t0 += lowrankChunk {
		n := min(lowrankChunk, f.Rows-t0)
		out := dst[t0*f.Cols : (t0+n)*f.Cols]
		lowrankRows(out, f, w, c, t0, n)
		for t := 0; rope != nil && t < n; t++ {
			rope.Apply(out[t*f.Cols:(t+1)*f.Cols], positions[t0+t])
		}
	}
	return nil
}

// ReconstructBytes is ReconstructInto writing elements of dtype dt (f32,
// f16 or bf16, little endian) into dst (f.Rows*f.Cols*dt.Size() bytes):
// each float32 row, computed exactly as ReconstructInto computes it, is
// rounded to dt to nearest even.
func ReconstructBytes(dst []byte, dt format.DType, f *Factors, gates []float32, rope *RoPE, positions []int64) error {
	if err := reconstructCheck(f, gates, rope, positions); err != nil {
		return err
	}
	if !dt.Float() || len(dst) != f.Rows*f.Cols*dt.Size() {
		return fmt.Errorf("%w: reconstruct: dst of %d bytes for %dx%d %v", format.ErrInvalidArgument, len(dst), f.Rows, f.Cols, dt)
	}
	w := lowrankWeights(f, gates)
	c := make([]float32, min(f.Rows, lowrankChunk)*f.Rank)
	out := make([]float32, min(f.Rows, lowrankChunk)*f.Cols)
	rowBytes := f.Cols * dt.Size()
	for t0 := 0; t0 < f.Rows; t0 += lowrankChunk {
		n := min(lowrankChunk, f.Rows-t0)
		lowrankRows(out[:n*f.Cols], f, w, c, t0, n)
		for t := 0; rope != nil && t < n; t++ {
			rope.Apply(out[t*f.Cols:(t+1)*f.Cols], positions[t0+t])
		}
		if err := format.FromF32(dst[t0*rowBytes:(t0+n)*rowBytes], out[:n*f.Cols], dt); err != nil {
			return err
		}
	}
	return nil
}

func reconstructCheck(f *Factors, gates []float32, rope *RoPE, positions []int64) error {
	if f.Rows < 1 || f.Cols < 1 || f.Rank < 0 || len(f.U) != f.Rows*f.Rank || len(f.S) != f.Rank || len(f.Vt) != f.Rank*f.Cols {
		return fmt.Errorf("%w: reconstruct: factors %dx%d rank %d with |U|=%d |S|=%d |Vt|=%d",
			format.ErrInvalidArgument, f.Rows, f.Cols, f.Rank, len(f.U), len(f.S), len(f.Vt))
	}
	if gates != nil {
		if err := checkGates(gates, f.Rank); err != nil {
			return fmt.Errorf("reconstruct: %w", err)
		}
	}
	switch {
	case rope == nil && positions != nil:
		return fmt.Errorf("%w: reconstruct: positions without a RoPE", format.ErrInvalidArgument)
	case rope != nil && rope.HeadDim() != f.Cols:
		return fmt.Errorf("%w: reconstruct: RoPE of head dim %d for %d columns", format.ErrInvalidArgument, rope.HeadDim(), f.Cols)
	case rope != nil && len(positions) != f.Rows:
		return fmt.Errorf("%w: reconstruct: %d positions for %d rows", format.ErrInvalidArgument, len(positions), f.Rows)
	}
	return nil
}

// lowrankWeights is w[i] = gates[i] * S[i] (S when gates is nil).
func lowrankWeights(f *Factors, gates []float32) []float32 {
	if gates == nil {
		return f.S
	}
	w := make([]float32, f.Rank)
	for i := range w {
		w[i] = gates[i] * f.S[i]
	}
	return w
}

// lowrankChunk is how many rows are computed at a time: enough to keep the
// kernel busy, few enough that the scratch stays in L1/L2.
const lowrankChunk = 64

// lowrankPool holds the c scratch of ReconstructInto (lowrankChunk x Rank
// floats, 8 KiB at rank 32), which decoders call once per 64 rows of each
// head: pooled rather than allocated per call.
var lowrankPool = sync.Pool{New: func() any { return new([]float32) }}

// lowrankScratch returns a pooled scratch of at least n floats, resliced
// to n; put it back in lowrankPool when done.
func lowrankScratch(n int) *[]float32 {
	p := lowrankPool.Get().(*[]float32)
	if cap(*p) < n {
		*p = make([]float32, n)
	}
	*p = (*p)[:n]
	return p
}

// lowrankRows computes rows t0..t0+n-1 into out (n x Cols) in the
// documented order: c[t][i] = w[i] * U[t][i] for the n rows (into c), then
// out = c Vt by matmulF32, whose per-element arithmetic is exactly the
// documented sum.
func lowrankRows(out []float32, f *Factors, w, c []float32, t0, n int) {
	c = c[:n*f.Rank]
	for t := 0; t < n; t++ {
		u := f.U[(t0+t)*f.Rank : (t0+t+1)*f.Rank]
		for i, wi := range w {
			c[t*f.Rank+i] = wi * u[i]
		}
	}
	matmulF32(out, f.Cols, c, f.Rank, f.Vt, f.Cols, n, f.Cols, f.Rank)
}
