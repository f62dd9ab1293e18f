package gpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// The CPU device's kernels. They perform the float32 operations of the
// CUDA kernels in the same order (documented on each), which is the order of
// the reconstruct package's CPU reference, so the three agree bit for bit.

// cpuReconstruct runs a ReconstructLaunch. For each job and row t:
//
//	coef[i] = float32(float32(g[i]*S[i]) * U[t][i])        g[i] = 1 without gates
//	acc[d]  = 0; for i = 0..rank-1: acc[d] = acc[d] + float32(coef[i]*Vt[i][d])
//	rotate the pairs of acc (reconstruct's shiftPair) with row t's cos/sin
//	round acc to the layout dtype, write at (head, token+t)
func cpuReconstruct(l *ReconstructLaunch) error {
	out, err := newCPUOut(&l.Layout, l.Dst, l.Table)
	if err != nil {
		return err
	}
	fac, aux, jobs := l.Factors.bytes(), l.Aux.bytes(), l.Jobs.bytes()
	hd := l.Layout.HeadDim
	acc, cs := make([]float32, hd), make([]float32, l.Rotary)
	for n := range l.NumJobs {
		j := decodeJob(jobs[n*JobSize:])
		if err := j.check(l); err != nil {
			return fmt.Errorf("job %d: %w", n, err)
		}
		rows, rank := int(j.Rows), int(j.Rank)
		u, s, vt, err := jobFactors(fac[j.Factors:], j.DType, rows, rank, hd)
		if err != nil {
			return fmt.Errorf("job %d: %w", n, err)
		}
		gs := make([]float32, rank)
		for i := range gs {
			gs[i] = s[i]
			if j.Gates != -1 {
				gs[i] = float32(f32at(aux, j.Gates+int64(4*i)) * s[i])
			}
		}
		coef := make([]float32, rank)
		for t := range rows {
			for i := range coef {
				coef[i] = float32(gs[i] * u[t*rank+i])
			}
			lowRankRow(acc, coef, vt)
			if j.CosSin != -1 {
				decodeF32(cs, aux[j.CosSin+int64(4*t*l.Rotary):])
				rotatePairs(acc, l.Rotary, l.Style, cs[:l.Rotary/2], cs[l.Rotary/2:])
			}
			if err := out.put(int(j.Head), int(j.Token)+t, acc); err != nil {
				return err
			}
		}
	}
	return nil
}

// jobFactors decodes U, S and Vt of an encoded factor block.
func jobFactors(b []byte, dt format.DType, rows, rank, hd int) (u, s, vt []float32, err error) {
	es := dt.Size()
	u, s, vt = make([]float32, rows*rank), make([]float32, rank), make([]float32, rank*hd)
	off := factorHeader
	for _, part := range [][]float32{u, s, vt} {
		if err := format.ToF32(part, b[off:off+len(part)*es], dt); err != nil {
			return nil, nil, nil, err
		}
		off += len(part) * es
	}
	return u, s, vt, nil
}

// lowRankRow is acc[d] = sum_i coef[i]*vt[i][d], summed in increasing i
// with every product rounded (no fused multiply-add).
func lowRankRow(acc, coef, vt []float32) {
	hd := len(acc)
	clear(acc)
	for i, c := range coef {
		v := vt[i*hd : (i+1)*hd]
		for d := range acc {
			acc[d] = acc[d] + float32(c*v[d])
		}
	}
}

// rotatePairs rotates the pairs of x's first rot dimensions as
// reconstruct's shiftPair does: (a*c - b*s, b*c + a*s), products rounded.
func rotatePairs(x []float32, rot int, style format.RoPEStyle, c, s []float32) {
	step, off := 1, rot/2
	if style == format.RoPEInterleaved {
		step, off = 2, 1
	}
	for j := range c {
		i := j * step
		a, b := x[i], x[i+off]
		x[i], x[i+off] = float32(a*c[j])-float32(b*s[j]), float32(b*c[j])+float32(a*s[j])
	}
}

// cpuShift runs a ShiftLaunch: for every head and token, decode the row to
// float32, rotate its pairs with the one cos/sin table (if any), round to
// the layout dtype and write it.
func cpuShift(l *ShiftLaunch) error {
	out, err := newCPUOut(&l.Layout, l.Dst, l.Table)
	if err != nil {
		return err
	}
	hd, es := l.Layout.HeadDim, l.SrcDType.Size()
	src, rowBytes := l.Src.bytes(), l.Layout.HeadDim*es
	var c, s []float32
	if l.CosSin.Len() != 0 {
		cs := f32s(l.CosSin.bytes(), l.Rotary)
		c, s = cs[:l.Rotary/2], cs[l.Rotary/2:]
	}
	row := make([]float32, hd)
	for h := range l.Layout.Heads {
		for t := range l.Tokens {
			off := (h*l.Tokens + t) * rowBytes
			if err := format.ToF32(row, src[off:off+rowBytes], l.SrcDType); err != nil {
				return err
			}
			if c != nil {
				rotatePairs(row, l.Rotary, l.Style, c, s)
			}
			if err := out.put(h, l.Token+t, row); err != nil {
				return err
			}
		}
	}
	return nil
}

// cpuOut writes rows into a layout's data buffer.
type cpuOut struct {
	lay   *Layout
	data  []byte
	table []int32
}

func newCPUOut(lay *Layout, dst, table Buffer) (*cpuOut, error) {
	return &cpuOut{lay: lay, data: dst.bytes(), table: decodeTable(table.bytes())}, nil
}

func (o *cpuOut) put(head, token int, row []float32) error {
	at, err := o.lay.Row(head, token, o.table)
	if err != nil {
		return err
	}
	es := o.lay.DType.Size()
	return format.FromF32(o.data[at*es:(at+len(row))*es], row, o.lay.DType)
}

// f32s decodes n little-endian float32 from b.
func f32s(b []byte, n int) []float32 {
	v := make([]float32, n)
	decodeF32(v, b)
	return v
}

// decodeF32 decodes len(v) little-endian float32 from b.
func decodeF32(v []float32, b []byte) {
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

func f32at(b []byte, off int64) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
}
