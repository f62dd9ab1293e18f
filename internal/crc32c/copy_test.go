package crc32c

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// guard fills the 64 bytes after dst, zeros the bytes before it: Copy
// must not touch either.
const guard = 0xa5

// checkCopy runs copyFn(crc, dst[dOff:dOff+n], src[sOff:sOff+n]) on a
// guarded dst and checks the CRC, the copied bytes and the guards;
// len(dstBuf) >= dOff+n+64.
func checkCopy(t *testing.T, name string, copyFn func(uint32, []byte, []byte) uint32, src, dstBuf []byte, sOff, dOff, n int, crc uint32) {
	t.Helper()
	clear(dstBuf[:dOff])
	for i := range dstBuf[dOff : dOff+n+64] {
		dstBuf[dOff+i] = guard
	}
	s := src[sOff : sOff+n]
	got := copyFn(crc, dstBuf[dOff:dOff+n], s)
	if w := want(crc, s); got != w {
		t.Fatalf("%s(len %d, src %d, dst %d) = %#08x, want %#08x", name, n, sOff, dOff, got, w)
	}
	if !bytes.Equal(dstBuf[dOff:dOff+n], s) {
		t.Fatalf("%s(len %d, src %d, dst %d): bytes differ", name, n, sOff, dOff)
	}
	if bytes.Count(dstBuf[:dOff], []byte{0}) != dOff || bytes.Count(dstBuf[dOff+n:dOff+n+64], []byte{guard}) != 64 {
		t.Fatalf("%s(len %d, src %d, dst %d) wrote outside dst", name, n, sOff, dOff)
	}
}

func copyAPI(crc uint32, dst, src []byte) uint32 { return Copy(dst, src, crc) }

// TestCopyLengths checks Copy, and each copying kernel this CPU runs, on
// every length 0..maxTableLen at every source alignment 0..63 (the
// destination alignment varies with it), against copy + hash/crc32.
func TestCopyLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	src := randBytes(r, maxTableLen+64)
	dst := make([]byte, maxTableLen+128)
	fns := []testKernel{{name: "Copy", ok: true, copy: copyAPI}}
	fns = append(fns, kernels...)
	for _, k := range fns {
		t.Run(k.name, func(t *testing.T) {
			if !k.ok || k.copy == nil {
				return
			}
			for sOff := range 64 {
				dOff := (sOff*37 + 5) % 64
				for n := k.min; n <= maxTableLen; n++ {
					checkCopy(t, k.name, k.copy, src, dst, sOff, dOff, n, uint32(n)*0x9e3779b9)
				}
			}
			for range 4 {
				n := k.min + r.IntN(3<<20)
				src := randBytes(r, n+64)
				dst := make([]byte, n+128)
				checkCopy(t, k.name, k.copy, src, dst, r.IntN(64), r.IntN(64), n, r.Uint32())
			}
		})
	}
}

// TestCopyShape checks Copy's lengths when dst and src differ, and
// overlapping dst and src in both directions.
func TestCopyShape(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	src := randBytes(r, 5000)
	for _, c := range []struct{ dst, src int }{{0, 5000}, {5000, 0}, {100, 5000}, {5000, 300}, {4999, 5000}} {
		t.Run(fmt.Sprintf("dst %d src %d", c.dst, c.src), func(t *testing.T) {
			dst := make([]byte, c.dst)
			n := min(c.dst, c.src)
			if got, w := Copy(dst, src[:c.src], 7), want(7, src[:n]); got != w || !bytes.Equal(dst[:n], src[:n]) {
				t.Fatalf("Copy(dst %d, src %d) = %#08x, want %#08x", c.dst, c.src, got, w)
			}
		})
	}
	for _, shift := range []int{-300, -64, -1, 0, 1, 17, 64, 1000} {
		buf := make([]byte, 12000)
		copy(buf, randBytes(r, len(buf)))
		sOff := 4000
		orig := bytes.Clone(buf[sOff : sOff+4000])
		got := Copy(buf[sOff+shift:sOff+shift+4000], buf[sOff:sOff+4000], 3)
		if w := want(3, orig); got != w {
			t.Fatalf("overlap %d: %#08x, want %#08x", shift, got, w)
		}
		if !bytes.Equal(buf[sOff+shift:sOff+shift+4000], orig) {
			t.Fatalf("overlap %d: bytes differ", shift)
		}
	}
}
