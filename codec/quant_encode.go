package codec

import (
	"errors"
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// errRange is returned by a quantizing pass whose parameters do not fit
// the scale dtype.
var errRange = errors.New("group range does not fit the parameter type")

// encodeQuant appends an int8 or int4 chunk: with opts.ScaleDType
// parameters, or f32 ones when some group's do not fit f16.
func encodeQuant(dst, src []byte, c format.Codec, d Desc, opts *Options) ([]byte, error) {
	start := len(dst)
	sdt := opts.ScaleDType
	for {
		l := newQuantLayout(c, d, opts.GroupSize, sdt)
		dst = append(dst, l.header()...)
		dst = append(dst, make([]byte, l.size()-quantHeader)...)
		q := newQuantizer(&l, dst[start:], d.DType)
		var err error
		if l.axis == axisTokens {
			err = q.encodeTokens(src)
		} else {
			err = q.encodeChannels(src)
		}
		switch {
		case err == nil:
			return dst, nil
		case errors.Is(err, errRange) && sdt == format.DTypeF16:
			dst, sdt = dst[:start], format.DTypeF32
			continue
		case errors.Is(err, errRange):
			return dst[:start], d.invalid("%v: %v, even with f32 parameters (elements near the dtype's limits)", c, err)
		}
		return dst[:start], d.invalid("%v: %v", c, err)
	}
}

// quantizer writes one chunk's parameters and codes into out.
type quantizer struct {
	l     *quantLayout
	out   []byte // the whole chunk, header included
	dt    format.DType
	row   []float32    // one row of head_dim elements
	codes []byte       // its codes
	g     []groupQuant // each element's group
}

func newQuantizer(l *quantLayout, out []byte, dt format.DType) *quantizer {
	return &quantizer{l: l, out: out, dt: dt, row: make([]float32, l.dim), codes: make([]byte, l.dim), g: make([]groupQuant, l.dim)}
}

// encodeTokens quantizes per channel, in groups of G tokens (keys). Each
// group is read twice, one row at a time: once for its range, once to
// quantize, so the scratch is a few rows whatever G is.
func (q *quantizer) encodeTokens(src []byte) error {
	l := q.l
	dim := l.dim
	lo, hi := make([]float32, dim), make([]float32, dim)
	for h := range l.heads {
		for g := range l.ngroups {
			t0, t1 := g*l.group, min((g+1)*l.group, l.tokens)
			for c := range dim {
				lo[c], hi[c] = float32(math.Inf(1)), float32(math.Inf(-1))
			}
			for t := t0; t < t1; t++ {
				if err := q.load(src, (h*l.tokens+t)*dim); err != nil {
					return err
				}
				for c, x := range q.row {
					lo[c], hi[c] = min(lo[c], x), max(hi[c], x)
				}
			}
			for c := range dim {
				if err := q.params(&q.g[c], lo[c], hi[c], (h*l.ngroups+g)*dim+c); err != nil {
					return err
				}
			}
			for t := t0; t < t1; t++ {
				base := (h*l.tokens + t) * dim
				_ = q.load(src, base)
				q.store(base)
			}
		}
	}
	return nil
}

// encodeChannels quantizes per token, in groups of G channels (values).
func (q *quantizer) encodeChannels(src []byte) error {
	l := q.l
	dim := l.dim
	for r := range l.heads * l.tokens {
		base := r * dim
		if err := q.load(src, base); err != nil {
			return err
		}
		for j := range l.ngroups {
			c0, c1 := j*l.group, min((j+1)*l.group, dim)
			lo, hi := q.row[c0], q.row[c0]
			for _, x := range q.row[c0:c1] {
				lo, hi = min(lo, x), max(hi, x)
			}
			if err := q.params(&q.g[c0], lo, hi, r*l.ngroups+j); err != nil {
				return err
			}
			for c := c0 + 1; c < c1; c++ {
				q.g[c] = q.g[c0]
			}
		}
		q.store(base)
	}
	return nil
}

// load converts the row starting at element base to float32 and checks
// that it is finite.
func (q *quantizer) load(src []byte, base int) error {
	size := q.dt.Size()
	if err := format.ToF32(q.row, src[base*size:(base+q.l.dim)*size], q.dt); err != nil {
		return err
	}
	for c, x := range q.row {
		if x-x != 0 {
			return fmt.Errorf("element %d is %v: only finite values can be quantized", base+c, x)
		}
	}
	return nil
}

// store quantizes the loaded row, starting at element base.
func (q *quantizer) store(base int) {
	quantRow(q.codes, q.row, q.g, q.l.qmax)
	packCodes(q.out[q.l.dataAt():], q.codes, base, q.l.bits)
}

// params computes and writes parameter i of a group spanning [lo, hi].
func (q *quantizer) params(g *groupQuant, lo, hi float32, i int) error {
	s, o, ok := groupParams(lo, hi, q.l.qmax, q.l.sdt, q.dt)
	if !ok {
		return fmt.Errorf("%w: group %d spans [%v, %v]", errRange, i, lo, hi)
	}
	q.l.putParam(q.out, q.l.scalesAt(), i, s)
	q.l.putParam(q.out, q.l.offsetsAt(), i, o)
	*g = newGroupQuant(s, o)
	return nil
}

// groupQuant maps an element of a group to its code.
type groupQuant struct {
	s, o, inv float32
	div       bool // 1/s overflows: divide instead
}

func newGroupQuant(s, o float32) groupQuant {
	g := groupQuant{s: s, o: o}
	if s > 0 {
		g.inv = 1 / s
		g.div = isInf(g.inv)
	}
	return g
}
