package codec

import (
	"math"

	"github.com/kvstore/kvstore/format"
)

// groupParams returns the scale s and offset o of a group whose finite
// elements span [lo, hi], for codes in [0, qmax]: both are exact in sdt,
// s >= 0, o <= lo, dequant(qmax, s, o) >= hi (so every element lies within
// the decoded range and quantizes within s/2), and o and dequant(qmax, s, o)
// round to finite values of dt. ok is false when sdt or dt cannot hold them.
func groupParams(lo, hi, qmax float32, sdt, dt format.DType) (s, o float32, ok bool) {
	o = lo
	if sdt == format.DTypeF16 {
		if o, ok = f16Down(lo); !ok {
			return 0, 0, false
		}
	}
	s = (hi - o) / qmax
	if sdt == format.DTypeF16 {
		s, _ = f16Up(s)
	}
	for i := 0; dequant(qmax, s, o) < hi; i++ {
		if i == 8 || isInf(s) {
			return 0, 0, false
		}
		s = nextUp(s, sdt)
	}
	if isInf(s) || !finiteIn(dt, o) || !finiteIn(dt, dequant(qmax, s, o)) {
		return 0, 0, false
	}
	return s, o, true
}

// validParams reports whether a decoded scale and offset are ones an
// encoder could write for dtype dt: s finite and >= 0, o finite, and the
// decoded range [o, dequant(qmax, s, o)] finite in dt. NaNs fail every
// comparison, so they are refused too.
func validParams(s, o, qmax float32, dt format.DType) bool {
	lim := finiteLimit(dt)
	return s >= 0 && s <= math.MaxFloat32 && abs32(o) < lim && abs32(dequant(qmax, s, o)) < lim
}

// finiteIn reports whether v is finite and stays finite rounded to dt.
func finiteIn(dt format.DType, v float32) bool { return abs32(v) < finiteLimit(dt) }

// finiteLimit is the least magnitude that rounds to infinity in dt: halfway
// past the largest finite value, which rounds to even, that is infinity.
func finiteLimit(dt format.DType) float32 {
	switch dt {
	case format.DTypeF16:
		return 65520 // 65504 + half its ulp of 32
	case format.DTypeBF16:
		return math.Float32frombits(0x7f7f8000) // 0x7f7f (largest) + half an ulp
	}
	return float32(math.Inf(1))
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

func isInf(v float32) bool { return math.IsInf(float64(v), 0) }

// nextUp is the next value of sdt above v.
func nextUp(v float32, sdt format.DType) float32 {
	if sdt == format.DTypeF16 {
		return format.F16ToF32(f16NextUp(format.F32ToF16(v)))
	}
	return math.Nextafter32(v, float32(math.Inf(1)))
}

// f16Down is the largest f16 value <= x; false if it is -Inf.
func f16Down(x float32) (float32, bool) {
	h := format.F32ToF16(x)
	if format.F16ToF32(h) > x {
		h = f16NextDown(h)
	}
	y := format.F16ToF32(h)
	return y, !isInf(y)
}

// f16Up is the smallest f16 value >= x; false if it is +Inf.
func f16Up(x float32) (float32, bool) {
	h := format.F32ToF16(x)
	if format.F16ToF32(h) < x {
		h = f16NextUp(h)
	}
	y := format.F16ToF32(h)
	return y, !isInf(y)
}

// f16NextUp and f16NextDown step a finite f16 to its neighbour (infinity
// past the largest); -0 and +0 step to the smallest subnormals.
func f16NextUp(h uint16) uint16 {
	switch {
	case h == 0x8000:
		return 0x0001
	case h&0x8000 != 0:
		return h - 1
	}
	return h + 1
}

func f16NextDown(h uint16) uint16 {
	switch {
	case h == 0x0000:
		return 0x8001
	case h&0x8000 != 0:
		return h + 1
	}
	return h - 1
}
