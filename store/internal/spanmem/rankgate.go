package spanmem

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// ArtifactRankGate names SeKV's rank gate g_phi, a small network shared
// by every (layer, KV head) that maps a span's singular spectrum to one
// gate per component. Its meta is opaque (no dtype, no shape); the bytes,
// little endian, with R = the gate's r_max, H = its hidden width and
// I = 2R+5 inputs (RankGateInputs):
//
//	0        4       6       8
//	+--------+-------+-------+---------------+------------+---------------+------------+
//	| "KVRG" | R u16 | H u16 | W1 f32 [H][I] | b1 f32 [H] | W2 f32 [R][H] | b2 f32 [R] |
//	+--------+-------+-------+---------------+------------+---------------+------------+
//	8 + 4 * (H*I + H + R*H + R) bytes; 1 <= R <= format.MaxFactorCols,
//	1 <= H <= MaxRankGateHidden, every weight finite.
const ArtifactRankGate = "sekv/rank-gate"

// MaxRankGateHidden bounds a rank gate's hidden width H.
const MaxRankGateHidden = 1024

// RankGate is g_phi: gates m = sigmoid(W2 tanh(W1 x + b1) + b2) of the
// features x of one span's K or V rows in one (layer, KV head)
// (RankGateFeatures), m_i for component i of its truncated SVD. Build
// keeps the components whose gate exceeds 1/2 (Rank).
type RankGate struct {
	MaxRank, Hidden int       // R and H
	W1, B1, W2, B2  []float32 // [H][I], [H], [R][H], [R]
}

// RankGateInputs is the number of features of a gate of r_max r.
func RankGateInputs(r int) int { return 2*r + 5 }

// rankGateLogFloor keeps ln(e) of an absent or negligible component finite.
const rankGateLogFloor = 1e-6

// Features returns the input of g for a span of rows x cols (tokens x
// head dim) whose truncated SVD has singular values s (descending) and
// whose squared Frobenius norm is total, in layer of layers, K (value
// false) or V: with e_i = s_i^2 / total (0 past len(s)),
//
//	x[i]      = sqrt(e_i)                        i < R: normalised singular values
//	x[R+i]    = ln(e_i + 1e-6) / -ln(1e-6)       i < R: their log energies, in [-1, 0]
//	x[2R]     = max(0, 1 - sum_i e_i)            energy past the first R
//	x[2R+1]   = ln(rows) / ln(4096)
//	x[2R+2]   = ln(cols) / ln(4096)
//	x[2R+3]   = layer / (layers - 1), 0 for one layer
//	x[2R+4]   = 1 for V, 0 for K
//
// A zero total gives e = 0 throughout.
func (g *RankGate) Features(s []float32, total float64, rows, cols, layer, layers int, value bool) []float64 {
	r := g.MaxRank
	x := make([]float64, RankGateInputs(r))
	tail := 1.0
	lf := -math.Log(rankGateLogFloor)
	for i := range r {
		var e float64
		if i < len(s) && total > 0 {
			e = float64(s[i]) * float64(s[i]) / total
		}
		x[i] = math.Sqrt(e)
		x[r+i] = math.Log(e+rankGateLogFloor) / lf
		tail -= e
	}
	if total <= 0 {
		tail = 0
	}
	x[2*r] = max(0, tail)
	x[2*r+1] = math.Log(float64(max(rows, 1))) / math.Log(4096)
	x[2*r+2] = math.Log(float64(max(cols, 1))) / math.Log(4096)
	if layers > 1 {
		x[2*r+3] = float64(layer) / float64(layers-1)
	}
	if value {
		x[2*r+4] = 1
	}
	return x
}

// HiddenOf returns tanh(W1 x + b1) for features x.
func (g *RankGate) HiddenOf(x []float64) []float64 {
	in := RankGateInputs(g.MaxRank)
	h := make([]float64, g.Hidden)
	for j := range h {
		a := float64(g.B1[j])
		for i, w := range g.W1[j*in : (j+1)*in] {
			a += float64(w) * x[i]
		}
		h[j] = math.Tanh(a)
	}
	return h
}

// Gates returns m_i = sigmoid((W2 h + b2)_i), i < R, for features x.
func (g *RankGate) Gates(x []float64) []float64 {
	h := g.HiddenOf(x)
	m := make([]float64, g.MaxRank)
	for i := range m {
		z := float64(g.B2[i])
		for j, w := range g.W2[i*g.Hidden : (i+1)*g.Hidden] {
			z += float64(w) * h[j]
		}
		m[i] = 1 / (1 + math.Exp(-z))
	}
	return m
}

// Rank is the rank the gate keeps of a span with singular values s (see
// Features): the number of components i < min(len(s), R) whose gate
// exceeds 1/2. The gates fall with the spectrum, so these are in practice
// the first ones; Build keeps that many leading components either way.
func (g *RankGate) Rank(s []float32, total float64, rows, cols, layer, layers int, value bool) int {
	m := g.Gates(g.Features(s, total, rows, cols, layer, layers, value))
	r := 0
	for i := range min(len(s), g.MaxRank) {
		if m[i] > 0.5 {
			r++
		}
	}
	return r
}

// Validate checks the shape and that every weight is finite. Errors wrap
// ErrInvalidArgument.
func (g *RankGate) Validate() error {
	if g == nil || g.MaxRank < 1 || g.MaxRank > format.MaxFactorCols || g.Hidden < 1 || g.Hidden > MaxRankGateHidden {
		return fmt.Errorf("%w: rank gate: shape", ErrInvalidArgument)
	}
	in := RankGateInputs(g.MaxRank)
	for _, p := range []struct {
		name string
		v    []float32
		n    int
	}{{"W1", g.W1, g.Hidden * in}, {"b1", g.B1, g.Hidden}, {"W2", g.W2, g.MaxRank * g.Hidden}, {"b2", g.B2, g.MaxRank}} {
		if len(p.v) != p.n {
			return fmt.Errorf("%w: rank gate: %s has %d weights, want %d", ErrInvalidArgument, p.name, len(p.v), p.n)
		}
		for i, w := range p.v {
			if math.IsNaN(float64(w)) || math.IsInf(float64(w), 0) {
				return fmt.Errorf("%w: rank gate: %s[%d] is %v", ErrInvalidArgument, p.name, i, w)
			}
		}
	}
	return nil
}

// rankGateMagic opens an ArtifactRankGate.
const rankGateMagic = "KVRG"

// EncodeRankGate lays g out as the data and meta of ArtifactRankGate.
// Errors wrap ErrInvalidArgument.
func EncodeRankGate(g *RankGate) ([]byte, format.ArtifactMeta, error) {
	if err := g.Validate(); err != nil {
		return nil, format.ArtifactMeta{}, err
	}
	out := make([]byte, 0, 8+4*(len(g.W1)+len(g.B1)+len(g.W2)+len(g.B2)))
	out = append(out, rankGateMagic...)
	out = binary.LittleEndian.AppendUint16(out, uint16(g.MaxRank))
	out = binary.LittleEndian.AppendUint16(out, uint16(g.Hidden))
	for _, v := range [][]float32{g.W1, g.B1, g.W2, g.B2} {
		for _, x := range v {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(x))
		}
	}
	return out, format.ArtifactMeta{}, nil
}

// DecodeRankGate parses an ArtifactRankGate. Errors wrap
// ErrInvalidArgument: a meta with a dtype or shape, another magic, R or H
// out of range, a length that does not match them, a non-finite weight.
func DecodeRankGate(data []byte, meta format.ArtifactMeta) (*RankGate, error) {
	if meta.DType != format.DTypeInvalid || len(meta.Shape) != 0 {
		return nil, fmt.Errorf("%w: rank gate artifact of %v %v, want opaque bytes", ErrInvalidArgument, meta.DType, meta.Shape)
	}
	if len(data) < 8 || string(data[:4]) != rankGateMagic {
		return nil, fmt.Errorf("%w: rank gate artifact: no %q header in %d bytes", ErrInvalidArgument, rankGateMagic, len(data))
	}
	r, h := int(binary.LittleEndian.Uint16(data[4:])), int(binary.LittleEndian.Uint16(data[6:]))
	if r < 1 || r > format.MaxFactorCols || h < 1 || h > MaxRankGateHidden {
		return nil, fmt.Errorf("%w: rank gate artifact: r_max %d, hidden %d", ErrInvalidArgument, r, h)
	}
	in := RankGateInputs(r)
	sizes := []int{h * in, h, r * h, r}
	n := 0
	for _, k := range sizes {
		n += k
	}
	if len(data) != 8+4*n {
		return nil, fmt.Errorf("%w: rank gate artifact of %d bytes, r_max %d hidden %d want %d", ErrInvalidArgument, len(data), r, h, 8+4*n)
	}
	v := make([][]float32, len(sizes))
	off := 8
	for i, k := range sizes {
		v[i] = make([]float32, k)
		for j := range v[i] {
			v[i][j] = math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
			off += 4
		}
	}
	g := &RankGate{MaxRank: r, Hidden: h, W1: v[0], B1: v[1], W2: v[2], B2: v[3]}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return g, nil
}

// rankGate reads the model's ArtifactRankGate, nil when there is none.
func rankGate(art Artifacts) (*RankGate, error) {
	a, ok, err := art.Artifact(ArtifactRankGate)
	if err != nil || !ok {
		return nil, err
	}
	g, err := DecodeRankGate(a.Data, a.Meta)
	if err != nil {
		return nil, fmt.Errorf("artifact %q: %w", ArtifactRankGate, err)
	}
	return g, nil
}

// factor is the truncated SVD of a span's rows x cols rows x in layer:
// reconstruct.SVD with o, unless a rank gate applies (a gate stored and no
// fixed rank in o): then the SVD keeps min(r_max, gate's R) components
// and the gate chooses how many of them stay.
func (b *build) factor(x []float32, rows, cols int, o reconstruct.SVDOptions, layer int, value bool) (*reconstruct.Factors, error) {
	if b.gate == nil || o.Rank > 0 {
		return reconstruct.SVD(x, rows, cols, o)
	}
	o.MaxRank = min(o.MaxRank, b.gate.MaxRank)
	o.Rank = o.MaxRank
	f, err := reconstruct.SVD(x, rows, cols, o)
	if err != nil {
		return nil, err
	}
	var total float64
	for _, v := range x {
		total += float64(v) * float64(v)
	}
	r := b.gate.Rank(f.S, total, rows, cols, layer, b.in.Model.Layers, value)
	if r == f.Rank {
		return f, nil
	}
	return f.Truncate(r), nil
}
