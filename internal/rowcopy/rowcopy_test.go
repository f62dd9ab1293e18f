package rowcopy

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// copiers are the calls under test: Copy, and Stream followed by its Fence.
var copiers = []struct {
	name string
	fn   func(dst, src []byte, rows, rowBytes, dstStride, srcStride int) error
}{
	{"Copy", Copy},
	{"Stream", func(dst, src []byte, rows, rb, ds, ss int) error {
		defer Fence()
		return Stream(dst, src, rows, rb, ds, ss)
	}},
}

// TestMatchesLoop compares Copy and Stream with the portable loop bit for
// bit at every dst and src alignment within 64 bytes, for rows of the
// lengths the layouts produce (a head_dim of 64 or 128 in f16/bf16 or f32,
// and lengths that are not multiples of 32), at strides equal to a row and
// longer ones (a paged slot, aligned or not); bytes outside the rows must
// stay as they were.
func TestMatchesLoop(t *testing.T) {
	for _, c := range copiers {
		t.Run(c.name, func(t *testing.T) {
			testMatchesLoop(t, c.name, c.fn)
		})
	}
}

func testMatchesLoop(t *testing.T, name string, fn func(dst, src []byte, rows, rb, ds, ss int) error) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, rb := range []int{0, 2, 30, 32, 64, 96, 128, 160, 256, 512, 100} {
		for _, rows := range []int{1, 2, 3, 16} {
			for _, pad := range []int{0, 32, 7, rb} { // dst stride = rb + pad (src stride: rb + pad/2)
				ds, ss := rb+pad, rb+pad/2
				for align := range 64 {
					n := 64 + rows*ds + 64
					src := make([]byte, 64+rows*ss)
					for i := range src {
						src[i] = byte(rng.Uint32())
					}
					want := bytes.Repeat([]byte{0xa5}, n)
					Loop(want[align:], src[align%13:], rows, rb, ds, ss)
					got := bytes.Repeat([]byte{0xa5}, n)
					if err := fn(got[align:], src[align%13:], rows, rb, ds, ss); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("%s: %d rows of %d bytes, strides %d/%d, dst at +%d: differs from Loop", name, rows, rb, ds, ss, align)
					}
				}
			}
		}
	}
}

// TestOverlap: rows that overlap their source are copied as Loop copies
// them (the built-in copy row by row), not by the kernel.
func TestOverlap(t *testing.T) {
	for _, c := range copiers {
		t.Run(c.name, func(t *testing.T) {
			for _, shift := range []int{-64, -1, 0, 1, 32, 200} {
				buf := make([]byte, 4096)
				for i := range buf {
					buf[i] = byte(i * 31)
				}
				want := append([]byte(nil), buf...)
				Loop(want[512+shift:], want[512:], 4, 256, 512, 256)
				if err := c.fn(buf[512+shift:], buf[512:], 4, 256, 512, 256); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf, want) {
					t.Fatalf("%s: dst at src%+d: differs from Loop", c.name, shift)
				}
			}
		})
	}
}

func TestRejects(t *testing.T) {
	buf := make([]byte, 1024)
	for _, c := range []struct {
		dst, src         []byte
		rows, rb, ds, ss int
	}{
		{buf, buf, -1, 32, 32, 32},
		{buf, buf, 1, -32, 32, 32},
		{buf, buf, 2, 64, 32, 64},
		{buf, buf, 2, 64, 64, 63},
		{buf[:127], make([]byte, 1024), 2, 64, 64, 64},
		{make([]byte, 1024), buf[:191], 2, 64, 64, 128},
	} {
		name := fmt.Sprintf("%d rows of %d at %d/%d into %d from %d", c.rows, c.rb, c.ds, c.ss, len(c.dst), len(c.src))
		for _, f := range copiers {
			if err := f.fn(c.dst, c.src, c.rows, c.rb, c.ds, c.ss); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s %s: %v, want ErrInvalidArgument", f.name, name, err)
			}
		}
	}
}

// TestPrefetch: a hint changes no byte and takes any arguments, rows the
// slice does not hold included, without a panic.
func TestPrefetch(t *testing.T) {
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i)
	}
	want := append([]byte(nil), buf...)
	for _, c := range [][3]int{{8, 256, 512}, {1, 4096, 4096}, {0, 256, 256}, {-1, 64, 64}, {2, 64, 32}, {9, 256, 512}, {1, 4097, 4097}} {
		Prefetch(buf, c[0], c[1], c[2])
	}
	Prefetch(nil, 1, 64, 64)
	if !bytes.Equal(buf, want) {
		t.Fatal("Prefetch changed the bytes")
	}
}
