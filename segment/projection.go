package segment

import (
	"encoding/binary"
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/kvstore/kvstore/format"
)

// DefaultProjectionDim is d', the routing dimension (SeKV uses 32).
const DefaultProjectionDim = 32

// Projection is the routing projection W of one (layer, KV head): Dim rows
// of HeadDim, row-major, so that W k is a key reduced to Dim dimensions.
// Routing scores the projected query against projected summary keys.
// A fitted or decoded Projection is never modified by this package.
type Projection struct {
	Dim, HeadDim int
	W            []float32 // Dim*HeadDim
}

// Validate checks the shape and that every weight is finite. Errors wrap
// format.ErrInvalidArgument.
func (p *Projection) Validate() error {
	switch {
	case p.HeadDim < 1 || p.HeadDim > format.MaxHeadDim:
		return fmt.Errorf("%w: projection: head dim %d not in [1, %d]", format.ErrInvalidArgument, p.HeadDim, format.MaxHeadDim)
	case p.Dim < 1 || p.Dim > p.HeadDim:
		return fmt.Errorf("%w: projection: dim %d not in [1, head dim %d]", format.ErrInvalidArgument, p.Dim, p.HeadDim)
	case len(p.W) != p.Dim*p.HeadDim:
		return fmt.Errorf("%w: projection: %d weights for %dx%d", format.ErrInvalidArgument, len(p.W), p.Dim, p.HeadDim)
	case !allFinite(p.W):
		return fmt.Errorf("%w: projection: non-finite weight", format.ErrInvalidArgument)
	}
	return nil
}

// Project writes W x into dst (Dim elements, allocated when dst is nil or
// too short) and returns it. Sums run in float64 and are rounded once. It
// panics if len(x) != HeadDim, a programming error like an index out of
// range.
func (p *Projection) Project(dst, x []float32) []float32 {
	if len(x) != p.HeadDim {
		panic(fmt.Sprintf("segment: project %d dims with a projection of head dim %d", len(x), p.HeadDim))
	}
	if len(dst) < p.Dim {
		dst = make([]float32, p.Dim)
	}
	dst = dst[:p.Dim]
	for i := range dst {
		row := p.W[i*p.HeadDim : (i+1)*p.HeadDim]
		var acc float64
		for j, w := range row {
			acc += float64(w) * float64(x[j])
		}
		dst[i] = float32(acc)
	}
	return dst
}

// FitPCA fits the default routing projection of one (layer, KV head)
// without training: the top dim principal directions of the given pre-RoPE
// keys (rows of headDim), i.e. the leading eigenvectors of their covariance
// (keys centred on their mean; the projection itself is linear and applied
// to uncentred keys, the shared mean being no use for telling spans apart).
// dim 0 means DefaultProjectionDim; dim is clipped to headDim.
//
// The rows of W are orthonormal, ordered by decreasing variance, and each
// has its largest-magnitude element positive (the first such on ties), so
// the same keys always give the same W. Directions of zero variance (fewer
// distinct keys than dim) are still orthonormal and deterministic.
// Sums run in float64. Errors wrap format.ErrInvalidArgument.
func FitPCA(keys []float32, headDim, dim int) (*Projection, error) {
	if dim == 0 {
		dim = DefaultProjectionDim
	}
	switch {
	case headDim < 1 || headDim > format.MaxHeadDim:
		return nil, fmt.Errorf("%w: fit pca: head dim %d not in [1, %d]", format.ErrInvalidArgument, headDim, format.MaxHeadDim)
	case dim < 0:
		return nil, fmt.Errorf("%w: fit pca: dim %d < 0", format.ErrInvalidArgument, dim)
	case len(keys) == 0 || len(keys)%headDim != 0:
		return nil, fmt.Errorf("%w: fit pca: %d floats is not a positive number of %d-dim keys", format.ErrInvalidArgument, len(keys), headDim)
	case !allFinite(keys):
		return nil, fmt.Errorf("%w: fit pca: non-finite key", format.ErrInvalidArgument)
	}
	dim = min(dim, headDim)
	cov := covariance(keys, headDim)
	var eig mat.EigenSym
	if !eig.Factorize(mat.NewSymDense(headDim, cov), true) {
		return nil, fmt.Errorf("%w: fit pca: eigen-decomposition did not converge", format.ErrInvalidArgument)
	}
	var vecs mat.Dense
	eig.VectorsTo(&vecs) // columns, eigenvalues ascending
	p := &Projection{Dim: dim, HeadDim: headDim, W: make([]float32, dim*headDim)}
	for i := 0; i < dim; i++ {
		col := headDim - 1 - i
		row := p.W[i*headDim : (i+1)*headDim]
		sign := pcaSign(&vecs, col)
		for j := range row {
			row[j] = float32(sign * vecs.At(j, col))
		}
	}
	return p, nil
}

// pcaSign is the sign that makes column col's largest-magnitude element
// positive (the first on ties).
func pcaSign(v *mat.Dense, col int) float64 {
	rows, _ := v.Dims()
	best, sign := -1.0, 1.0
	for j := 0; j < rows; j++ {
		if a := math.Abs(v.At(j, col)); a > best {
			best, sign = a, math.Copysign(1, v.At(j, col))
		}
	}
	return sign
}

// covariance returns the headDim x headDim covariance of the keys (rows of
// headDim), row-major, both triangles filled. Rows are centred and folded in
// by blocks so that memory stays small for many keys.
func covariance(keys []float32, headDim int) []float64 {
	n := len(keys) / headDim
	mean := make([]float64, headDim)
	for i := 0; i < n; i++ {
		for j, v := range keys[i*headDim : (i+1)*headDim] {
			mean[j] += float64(v)
		}
	}
	for j := range mean {
		mean[j] /= float64(n)
	}
	const block = 256
	cov := blas64.Symmetric{N: headDim, Stride: headDim, Uplo: blas.Upper, Data: make([]float64, headDim*headDim)}
	buf := make([]float64, block*headDim)
	for i := 0; i < n; i += block {
		rows := min(block, n-i)
		for r := 0; r < rows; r++ {
			for j, v := range keys[(i+r)*headDim : (i+r+1)*headDim] {
				buf[r*headDim+j] = float64(v) - mean[j]
			}
		}
		a := blas64.General{Rows: rows, Cols: headDim, Stride: headDim, Data: buf[:rows*headDim]}
		blas64.Syrk(blas.Trans, 1/float64(n), a, 1, cov)
	}
	for i := 0; i < headDim; i++ {
		for j := 0; j < i; j++ {
			cov.Data[i*headDim+j] = cov.Data[j*headDim+i]
		}
	}
	return cov.Data
}

func allFinite(x []float32) bool {
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}

// Projection encoding, little endian:
//
//	+-----------+---------+-------------+------------------------------+
//	| "KVPJ"    | dim u32 | headDim u32 | W: dim*headDim f32, row-major |
//	| 4 bytes   |         |             |                              |
//	+-----------+---------+-------------+------------------------------+
//
// There is no checksum: the store frames and checksums artifacts.
const (
	projectionMagic      = "KVPJ"
	projectionHeaderSize = 12
)

// MarshalBinary encodes p as drawn above.
func (p *Projection) MarshalBinary() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	b := make([]byte, projectionHeaderSize, projectionHeaderSize+4*len(p.W))
	copy(b, projectionMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(p.Dim))
	binary.LittleEndian.PutUint32(b[8:], uint32(p.HeadDim))
	for _, w := range p.W {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(w))
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote into p. Bad bytes (magic,
// shape, length, a non-finite weight) give an error wrapping
// format.ErrCorruption and leave p unchanged; the shape is checked against
// len(b) before anything is allocated.
func (p *Projection) UnmarshalBinary(b []byte) error {
	if len(b) < projectionHeaderSize || string(b[:4]) != projectionMagic {
		return fmt.Errorf("%w: projection: %d bytes without the %q header", format.ErrCorruption, len(b), projectionMagic)
	}
	dim := uint64(binary.LittleEndian.Uint32(b[4:]))
	headDim := uint64(binary.LittleEndian.Uint32(b[8:]))
	if headDim < 1 || headDim > format.MaxHeadDim || dim < 1 || dim > headDim ||
		uint64(len(b)-projectionHeaderSize) != 4*dim*headDim {
		return fmt.Errorf("%w: projection: %dx%d in %d bytes", format.ErrCorruption, dim, headDim, len(b))
	}
	q := Projection{Dim: int(dim), HeadDim: int(headDim), W: make([]float32, dim*headDim)}
	for i := range q.W {
		q.W[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[projectionHeaderSize+4*i:]))
	}
	if !allFinite(q.W) {
		return fmt.Errorf("%w: projection: non-finite weight", format.ErrCorruption)
	}
	*p = q
	return nil
}
