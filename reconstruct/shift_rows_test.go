package reconstruct

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/kvstore/kvstore/format"
)

// TestShiftRowsMatchesShift scatters rows through ShiftRows at strides (a
// paged layout's [slot][head][dim] from [head][slot][dim]), into a
// destination 32-byte aligned or not, and compares each row bit for bit with
// Shifter.Shift of the contiguous rows, out of place and in place; bytes
// between rows must stay untouched.
func TestShiftRowsMatchesShift(t *testing.T) { shiftWidths(t, testShiftRowsMatchesShift) }

func testShiftRowsMatchesShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	const heads, tokens = 3, 7
	for _, sc := range shiftCases {
		r := mustRoPE(t, sc.cfg, sc.headDim)
		for _, delta := range []int64{0, 5, -1234} {
			sh, err := NewShifter(r, delta)
			if err != nil {
				t.Fatal(err)
			}
			for _, dt := range shiftDTypes {
				rb := sc.headDim * dt.Size()
				src := shiftEncode(t, ropeRandVec(rng, heads*tokens*sc.headDim), dt)
				want := make([]byte, len(src))
				if err := sh.Shift(want, src, dt, heads, tokens); err != nil {
					t.Fatal(err)
				}
				for _, f := range []struct {
					name string
					fn   func(dst, src []byte, dt format.DType, rows, dstStride, srcStride int) error
				}{{"ShiftRows", sh.ShiftRows}, {"StreamRows", sh.StreamRows}} {
					for _, align := range []int{0, 2, 16, 32} {
						name := fmt.Sprintf("%s %s %v delta %d dst at 64k+%d", f.name, sc.name, dt, delta, align)
						got := aligned64(len(src)+rb+align, 0xa5)[align:]
						for h := range heads {
							if err := f.fn(got[h*rb:], src[h*tokens*rb:], dt, tokens, heads*rb, rb); err != nil {
								t.Fatal(err)
							}
						}
						for h := range heads {
							for tk := range tokens {
								g, w := got[(tk*heads+h)*rb:][:rb], want[(h*tokens+tk)*rb:][:rb]
								if !bytes.Equal(g, w) {
									t.Fatalf("%s: head %d token %d differs from Shift", name, h, tk)
								}
							}
						}
						if !bytes.Equal(got[len(src):], bytes.Repeat([]byte{0xa5}, rb)) {
							t.Fatalf("%s: wrote past the last row", name)
						}
						in := append(aligned64(len(src)+align, 0)[align:align], src...)
						if err := f.fn(in, in, dt, heads*tokens, rb, rb); err != nil || !bytes.Equal(in, want) {
							t.Fatalf("%s: in place differs from Shift (err %v)", name, err)
						}
						Fence()
					}
				}
			}
		}
	}
}

// aligned64 is n bytes of b starting at a 64-byte boundary (the
// non-temporal AVX-512 kernel's alignment).
func aligned64(n int, b byte) []byte {
	buf := bytes.Repeat([]byte{b}, n+64)
	off := int(-uintptr(unsafe.Pointer(&buf[0])) & 63)
	return buf[off : off+n : off+n]
}

func TestShiftRowsRejects(t *testing.T) {
	r := mustRoPE(t, ropeLlama31, 128)
	sh, err := NewShifter(r, 3)
	if err != nil {
		t.Fatal(err)
	}
	dt := format.DTypeBF16
	rb := 128 * dt.Size()
	buf := make([]byte, 4*rb)
	for _, c := range []struct {
		name             string
		dst, src         []byte
		dt               format.DType
		rows, dstS, srcS int
	}{
		{"int dtype", buf, buf, format.DTypeInt8, 1, rb, rb},
		{"negative rows", buf, buf, dt, -1, rb, rb},
		{"short stride", buf, buf, dt, 2, rb - 2, rb},
		{"short dst", buf[:rb], make([]byte, 4*rb), dt, 2, rb, rb},
		{"short src", make([]byte, 4*rb), buf[:3*rb-1], dt, 2, 2 * rb, 2 * rb},
		{"partial overlap", buf[2:], buf, dt, 1, rb, rb},
	} {
		if err := sh.ShiftRows(c.dst, c.src, c.dt, c.rows, c.dstS, c.srcS); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", c.name, err)
		}
	}
}
