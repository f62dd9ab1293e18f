package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// TestQuantDecodeMatchesReference decodes random int8/int4 chunks of many
// shapes (odd head dims, groups that do and do not tile a row, tails),
// output dtypes and parameter types, with parameters that are zero,
// subnormal, huge, negative, NaN or infinite, three ways: with the SIMD
// kernels (where this CPU has them), with the portable code, and with
// refDecodeQuant, a frozen copy of the row-at-a-time decoder the kernels
// replaced. All three must agree bit for bit on the output and word for
// word on the error.
func TestQuantDecodeMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 11))
	dims := []int{1, 3, 7, 8, 12, 16, 24, 40, 64, 100, 128, 257, 264}
	groups := []int{1, 2, 3, 7, 8, 16, 24, 32, 40, 64, 200}
	dts := []format.DType{format.DTypeBF16, format.DTypeF16, format.DTypeF32}
	for i := range 600 {
		c := []format.Codec{format.CodecInt8, format.CodecInt4}[i%2]
		d := desc(format.ChunkK, dts[i/2%3], [3]int{1 + r.IntN(3), 1 + r.IntN(70), dims[r.IntN(len(dims))]})
		sdt := []format.DType{format.DTypeF16, format.DTypeF32}[i/6%2]
		axis := uint8(1 + i/12%2)
		bad := i%3 == 2 // bad parameters somewhere
		src := randomQuantChunk(r, c, d, groups[r.IntN(len(groups))], sdt, axis, bad)
		name := fmt.Sprintf("%d/%v/%v/%v/axis%d/g%d", i, c, d, sdt, axis, binary.LittleEndian.Uint16(src[2:]))
		want := make([]byte, d.RawSize())
		wantErr := refDecodeQuant(want, src, c, d)
		if !bad && wantErr != nil {
			t.Fatalf("%s: a good chunk fails the reference: %v", name, wantErr)
		}
		for _, simd := range []bool{false, quantAVX2} {
			got := make([]byte, d.RawSize())
			err := decodeQuantWith(got, src, c, d, simd)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Fatalf("%s simd=%v: error %v, reference %v", name, simd, err, wantErr)
			}
			if err == nil && !bytes.Equal(got, want) {
				at := firstDiff(got, want)
				t.Fatalf("%s simd=%v: byte %d is %#x, reference %#x", name, simd, at, got[at], want[at])
			}
		}
	}
}

// TestQuantDecodeExtremes checks the kernels on a chunk whose every
// element lands at the edge of its dtype: the largest finite values, the
// subnormals and their rounding ties, and signed zeros.
func TestQuantDecodeExtremes(t *testing.T) {
	for _, dt := range []format.DType{format.DTypeBF16, format.DTypeF16, format.DTypeF32} {
		for _, c := range []format.Codec{format.CodecInt8, format.CodecInt4} {
			for _, axis := range []uint8{axisTokens, axisChannels} {
				d := desc(format.ChunkK, dt, [3]int{2, 16, 32})
				l := newQuantLayoutAxis(c, d, 8, format.DTypeF32, axis)
				src := make([]byte, l.size())
				copy(src, l.header())
				r := rand.New(rand.NewPCG(uint64(dt), uint64(c)))
				for i := range l.params {
					s, o := float32(0), float32(0)
					for range 50 {
						if ts, to := extremeParam(r, dt, l.qmax); validParams(ts, to, l.qmax, dt) {
							s, o = ts, to
							break
						}
					}
					l.putParam(src, l.scalesAt(), i, s)
					l.putParam(src, l.offsetsAt(), i, o)
				}
				fillCodes(r, src[l.dataAt():], d.Elems(), l.bits)
				want := make([]byte, d.RawSize())
				if err := refDecodeQuant(want, src, c, d); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, d.RawSize())
				if err := decodeQuantWith(got, src, c, d, quantAVX2); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					at := firstDiff(got, want)
					t.Fatalf("%v %v axis %d: byte %d is %#x, reference %#x", dt, c, axis, at, got[at], want[at])
				}
				if n := subnormals(got, dt); n == 0 {
					t.Errorf("%v %v axis %d: no subnormal output: the parameters miss the edge they are for", dt, c, axis)
				}
			}
		}
	}
}

// TestQuantDecodeAllocs checks that decoding allocates nothing up to
// head_dim 256 (the scratch lives on the stack) and a few rows above.
func TestQuantDecodeAllocs(t *testing.T) {
	for _, c := range []format.Codec{format.CodecInt8, format.CodecInt4} {
		for _, k := range allKinds {
			for _, s := range []struct {
				shape [3]int
				max   float64
			}{{[3]int{2, 40, 128}, 0}, {[3]int{1, 9, 7}, 0}, {[3]int{1, 5, 300}, 2}} {
				d := desc(k, format.DTypeBF16, s.shape)
				enc := mustEncode(t, kvData(d, 3), c, d, Options{})
				dst := make([]byte, d.RawSize())
				got := testing.AllocsPerRun(5, func() {
					if err := Decode(dst, enc, c, d); err != nil {
						t.Fatal(err)
					}
				})
				if got > s.max {
					t.Errorf("%v %v: %v allocations a decode, want at most %v", c, d, got, s.max)
				}
			}
		}
	}
}

// subnormals counts the subnormal elements of b, a tensor of dt.
func subnormals(b []byte, dt format.DType) int {
	n := 0
	for i := 0; i < len(b); i += dt.Size() {
		var sub bool
		switch dt {
		case format.DTypeF32:
			v := binary.LittleEndian.Uint32(b[i:])
			sub = v&0x7f800000 == 0 && v&0x007fffff != 0
		case format.DTypeF16:
			v := binary.LittleEndian.Uint16(b[i:])
			sub = v&0x7c00 == 0 && v&0x03ff != 0
		default:
			v := binary.LittleEndian.Uint16(b[i:])
			sub = v&0x7f80 == 0 && v&0x007f != 0
		}
		if sub {
			n++
		}
	}
	return n
}

// extremeParam draws a scale and offset near the edges of dt: subnormal
// float32 and f16 magnitudes, ties of the output rounding, the largest
// finite outputs, signed zeros.
func extremeParam(r *rand.Rand, dt format.DType, qmax float32) (s, o float32) {
	top := finiteLimit(dt)
	if dt == format.DTypeF32 {
		top = math.MaxFloat32
	}
	pick := func() float32 {
		switch r.IntN(7) {
		case 0:
			return 0
		case 1:
			return math.Float32frombits(r.Uint32() & 0x007fffff) // f32 subnormal
		case 2:
			return math.Float32frombits(0x33000000 + r.Uint32()&0x03ffffff) // f16 subnormal range
		case 3:
			return format.F16ToF32(uint16(r.IntN(0x400))) + math.Float32frombits(0x33000000) // f16 ties
		case 4:
			return math.Float32frombits(math.Float32bits(top) - uint32(r.IntN(1<<16)))
		case 5:
			return math.Float32frombits(0x7f7f8000-0x10000*uint32(r.IntN(4))) - 1
		}
		return float32(r.NormFloat64())
	}
	s = pick()
	if r.IntN(2) == 0 {
		s /= qmax
	}
	o = pick()
	if r.IntN(2) == 0 {
		o = -o
		if r.IntN(2) == 0 {
			o = -o - s*qmax
		}
	}
	return s, o
}

// randomQuantChunk writes a well-formed int8/int4 chunk of d with random
// codes and parameters drawn from extremeParam that are valid, and, when
// bad, one random parameter replaced by a bad one (negative or non-finite
// scale, non-finite or out-of-range offset).
func randomQuantChunk(r *rand.Rand, c format.Codec, d Desc, group int, sdt format.DType, axis uint8, bad bool) []byte {
	l := newQuantLayoutAxis(c, d, group, sdt, axis)
	src := make([]byte, l.size())
	copy(src, l.header())
	for i := range l.params {
		s, o := float32(1), float32(0)
		for range 20 {
			ts, to := extremeParam(r, d.DType, l.qmax)
			if sdt == format.DTypeF16 {
				ts, to = format.F16ToF32(format.F32ToF16(ts)), format.F16ToF32(format.F32ToF16(to))
			}
			if validParams(ts, to, l.qmax, d.DType) {
				s, o = ts, to
				break
			}
		}
		l.putParam(src, l.scalesAt(), i, s)
		l.putParam(src, l.offsetsAt(), i, o)
	}
	nbad := 0
	if bad {
		nbad = 1 + r.IntN(3)
	}
	for range nbad {
		pair := badParams(d.DType, l.qmax)[r.IntN(8)]
		i := r.IntN(l.params)
		l.putParam(src, l.scalesAt(), i, pair[0])
		l.putParam(src, l.offsetsAt(), i, pair[1])
	}
	fillCodes(r, src[l.dataAt():], d.Elems(), l.bits)
	return src
}

// badParams are scales and offsets that each fail one condition of
// validParams for dtype dt: a negative or non-finite scale, a non-finite
// offset, an offset beyond dt whose range ends within it, a range ending
// beyond dt.
func badParams(dt format.DType, qmax float32) [8][2]float32 {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	lim := finiteLimit(dt)
	if dt == format.DTypeF32 {
		lim = math.MaxFloat32
	}
	return [8][2]float32{{-1e-40, 0}, {nan, 0}, {inf, 0}, {1, nan}, {1, -inf},
		{lim / qmax, -lim}, {lim / qmax * 1.01, 1}, {lim / qmax / 2, lim * 0.75}}
}

// fillCodes writes n random codes of the given bits into data, the int4
// padding nibble zero.
func fillCodes(r *rand.Rand, data []byte, n, bits int) {
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if bits == 4 && n%2 == 1 {
		data[len(data)-1] &= 0x0f
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// refDecodeQuant is the int8/int4 decoder as it was before the SIMD
// kernels, kept (renamed, its per-element arithmetic spelt out) as the
// reference they must match.
func refDecodeQuant(dst, src []byte, c format.Codec, d Desc) error {
	l, err := parseQuant(src, c, d)
	if err != nil {
		return err
	}
	q := refDequantizer{l: &l, src: src, data: src[l.dataAt():], dst: dst, d: d, c: c,
		codes: make([]byte, l.dim), sc: make([]float32, l.dim), of: make([]float32, l.dim)}
	if l.axis == axisTokens {
		return q.decodeTokens()
	}
	return q.decodeChannels()
}

type refDequantizer struct {
	l      *quantLayout
	src    []byte
	data   []byte
	dst    []byte
	d      Desc
	c      format.Codec
	codes  []byte
	sc, of []float32
}

func (q *refDequantizer) decodeTokens() error {
	l := q.l
	dim := l.dim
	for h := range l.heads {
		for g := range l.ngroups {
			base := (h*l.ngroups + g) * dim
			for c := range dim {
				if err := q.param(base+c, &q.sc[c], &q.of[c]); err != nil {
					return err
				}
			}
			for t := g * l.group; t < min((g+1)*l.group, l.tokens); t++ {
				q.row((h*l.tokens + t) * dim)
			}
		}
	}
	return nil
}

func (q *refDequantizer) decodeChannels() error {
	l := q.l
	dim, size := l.dim, q.d.DType.Size()
	var s, o float32
	for r := range l.heads * l.tokens {
		base := r * dim
		codes := refUnpackCodes(q.codes, q.data, base, l.bits)
		for j := range l.ngroups {
			if err := q.param(r*l.ngroups+j, &s, &o); err != nil {
				return err
			}
			c0, c1 := j*l.group, min((j+1)*l.group, dim)
			refDequantGroup(q.dst[(base+c0)*size:], codes[c0:c1], s, o, q.d.DType)
		}
	}
	return nil
}

func (q *refDequantizer) param(i int, s, o *float32) error {
	*s = q.l.param(q.src, q.l.scalesAt(), i)
	*o = q.l.param(q.src, q.l.offsetsAt(), i)
	if !validParams(*s, *o, q.l.qmax, q.d.DType) {
		return corrupt(q.c, q.d, "group %d: scale %v, offset %v: not finite, negative, or beyond %v", i, *s, *o, q.d.DType)
	}
	return nil
}

func (q *refDequantizer) row(base int) {
	size := q.d.DType.Size()
	codes := refUnpackCodes(q.codes, q.data, base, q.l.bits)
	refDequantRow(q.dst[base*size:], codes, q.sc, q.of, q.d.DType)
}

func refUnpackCodes(codes, data []byte, base, bits int) []byte {
	n := len(codes)
	if bits == 8 {
		return data[base : base+n]
	}
	i := 0
	if base%2 == 1 {
		codes[0] = data[base/2] >> 4
		i = 1
	}
	in := data[(base+i)/2:]
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(codes[i:], refSpreadNibbles(binary.LittleEndian.Uint32(in)))
		in = in[4:]
	}
	for ; i+1 < n; i += 2 {
		codes[i], codes[i+1] = in[0]&0xf, in[0]>>4
		in = in[1:]
	}
	if i < n {
		codes[i] = in[0] & 0xf
	}
	return codes
}

func refSpreadNibbles(x uint32) uint64 {
	y := uint64(x)
	y = (y | y<<16) & 0x0000ffff0000ffff
	y = (y | y<<8) & 0x00ff00ff00ff00ff
	return y&0x000f000f000f000f | (y>>4&0x000f000f000f000f)<<8
}

func refDequantRow(out, codes []byte, sc, of []float32, dt format.DType) {
	n := len(codes)
	sc, of = sc[:n], of[:n]
	switch dt {
	case format.DTypeBF16:
		out = out[:2*n]
		c := 0
		for ; c+4 <= n; c += 4 {
			binary.LittleEndian.PutUint64(out[2*c:], uint64(refToBF16(float32(float32(codes[c])*sc[c])+of[c]))|
				uint64(refToBF16(float32(float32(codes[c+1])*sc[c+1])+of[c+1]))<<16|
				uint64(refToBF16(float32(float32(codes[c+2])*sc[c+2])+of[c+2]))<<32|
				uint64(refToBF16(float32(float32(codes[c+3])*sc[c+3])+of[c+3]))<<48)
		}
		for ; c < n; c++ {
			binary.LittleEndian.PutUint16(out[2*c:], refToBF16(float32(float32(codes[c])*sc[c])+of[c]))
		}
	case format.DTypeF16:
		out = out[:2*n]
		for c, q := range codes {
			binary.LittleEndian.PutUint16(out[2*c:], format.F32ToF16(float32(float32(q)*sc[c])+of[c]))
		}
	default:
		out = out[:4*n]
		for c, q := range codes {
			binary.LittleEndian.PutUint32(out[4*c:], math.Float32bits(float32(float32(q)*sc[c])+of[c]))
		}
	}
}

func refDequantGroup(out, codes []byte, s, o float32, dt format.DType) {
	n := len(codes)
	switch dt {
	case format.DTypeBF16:
		out = out[:2*n]
		for c, q := range codes {
			binary.LittleEndian.PutUint16(out[2*c:], refToBF16(float32(float32(q)*s)+o))
		}
	case format.DTypeF16:
		out = out[:2*n]
		for c, q := range codes {
			binary.LittleEndian.PutUint16(out[2*c:], format.F32ToF16(float32(float32(q)*s)+o))
		}
	default:
		out = out[:4*n]
		for c, q := range codes {
			binary.LittleEndian.PutUint32(out[4*c:], math.Float32bits(float32(float32(q)*s)+o))
		}
	}
}

func refToBF16(v float32) uint16 {
	b := math.Float32bits(v)
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
