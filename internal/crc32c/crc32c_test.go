package crc32c

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// testKernel is one folding kernel as the tests see it.
type testKernel struct {
	name   string
	ok     bool // the CPU runs it
	min    int  // shortest input it takes
	update func(crc uint32, p []byte) uint32
	copy   func(crc uint32, dst, src []byte) uint32 // nil: same as another's
}

// want is the reference: hash/crc32 with the Castagnoli table.
func want(crc uint32, p []byte) uint32 { return crc32.Update(crc, table, p) }

// randBytes returns n bytes from r.
func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// maxTableLen bounds the lengths the table tests try at every alignment.
const maxTableLen = 3<<10 + 100

// TestUpdateLengths checks Update and Checksum against hash/crc32 on every
// length 0..maxTableLen at every alignment 0..63, from a zero and a
// nonzero CRC.
func TestUpdateLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := randBytes(r, maxTableLen+64)
	t.Logf("kernel %s", kernel)
	for align := range 64 {
		for n := 0; n <= maxTableLen; n++ {
			p := buf[align : align+n]
			if got, w := Checksum(p), want(0, p); got != w {
				t.Fatalf("Checksum(len %d, align %d) = %#08x, want %#08x", n, align, got, w)
			}
			seed := uint32(n)*0x9e3779b9 + uint32(align)
			if got, w := Update(seed, p), want(seed, p); got != w {
				t.Fatalf("Update(%#x, len %d, align %d) = %#08x, want %#08x", seed, n, align, got, w)
			}
		}
	}
}

// TestKernels calls each kernel this CPU runs directly, on every length
// from its minimum to maxTableLen at every alignment, and on large random
// inputs, against hash/crc32.
func TestKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	buf := randBytes(r, maxTableLen+64)
	ran := 0
	for _, k := range kernels {
		t.Run(k.name, func(t *testing.T) {
			if !k.ok {
				t.Logf("%s: not on this CPU", k.name)
				return
			}
			ran++
			for align := range 64 {
				for n := k.min; n <= maxTableLen; n++ {
					p := buf[align : align+n]
					seed := r.Uint32()
					if got, w := k.update(seed, p), want(seed, p); got != w {
						t.Fatalf("%s(%#x, len %d, align %d) = %#08x, want %#08x", k.name, seed, n, align, got, w)
					}
				}
			}
			for range 8 {
				p := randBytes(r, k.min+r.IntN(5<<20))
				seed := r.Uint32()
				if got, w := k.update(seed, p), want(seed, p); got != w {
					t.Fatalf("%s(%#x, len %d) = %#08x, want %#08x", k.name, seed, len(p), got, w)
				}
			}
		})
	}
	t.Logf("%d of %d kernels ran", ran, len(kernels))
}

// TestKernelBlocks checks each kernel on lengths around the hybrid blocks
// (of blockBytes after the first 256 bytes for AVX-512, of sseBlockBytes
// after the first 64 for SSE), at every alignment.
func TestKernelBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	buf := randBytes(r, 256+4*blockBytes+4064)
	for _, k := range kernels {
		t.Run(k.name, func(t *testing.T) {
			if !k.ok {
				return
			}
			for _, block := range [][2]int{{256, blockBytes}, {64, sseBlockBytes}} {
				for m := range 4 {
					for _, extra := range []int{-1, 0, 1, 15, 16, 17, 63, 64, 255, 256, 257, 4000} {
						n := block[0] + m*block[1] + extra
						if n < k.min || n+64 > len(buf) {
							continue
						}
						for align := range 64 {
							p := buf[align : align+n]
							seed := r.Uint32()
							if got, w := k.update(seed, p), want(seed, p); got != w {
								t.Fatalf("%s(%#x, len %d, align %d) = %#08x, want %#08x", k.name, seed, n, align, got, w)
							}
						}
					}
				}
			}
		})
	}
}

// TestLarge checks Update on large random inputs of odd lengths and
// alignments.
func TestLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	buf := randBytes(r, 17<<20)
	for range 12 {
		off := r.IntN(64)
		n := r.IntN(len(buf) - off)
		p := buf[off : off+n]
		seed := r.Uint32()
		if got, w := Update(seed, p), want(seed, p); got != w {
			t.Fatalf("Update(%#x, len %d, off %d) = %#08x, want %#08x", seed, n, off, got, w)
		}
	}
}

// TestSplit checks Update(Update(c, a), b) == Update(c, a||b) at split
// points around the kernels' block sizes and at random ones.
func TestSplit(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	p := randBytes(r, 1<<16+77)
	whole := Update(0x1234, p)
	splits := []int{0, 1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1000, len(p) - 1, len(p)}
	for range 50 {
		splits = append(splits, r.IntN(len(p)+1))
	}
	for _, s := range splits {
		if got := Update(Update(0x1234, p[:s]), p[s:]); got != whole {
			t.Fatalf("split at %d of %d: %#08x, want %#08x", s, len(p), got, whole)
		}
	}
	if whole != want(0x1234, p) {
		t.Fatalf("whole %#08x, want %#08x", whole, want(0x1234, p))
	}
}

// TestKnown checks the CRC32C check value of RFC 3720's test vectors.
func TestKnown(t *testing.T) {
	for _, c := range []struct {
		p    []byte
		want uint32
	}{
		{[]byte("123456789"), 0xe3069283},
		{make([]byte, 32), 0x8a9136aa},
		{bytes.Repeat([]byte{0xff}, 32), 0x62a8ab43},
	} {
		if got := Checksum(c.p); got != c.want {
			t.Errorf("Checksum(%x) = %#08x, want %#08x", c.p, got, c.want)
		}
	}
	long := bytes.Repeat([]byte("123456789"), 1000)
	if got, w := Checksum(long), crc32.Checksum(long, table); got != w {
		t.Errorf("Checksum(9000 bytes) = %#08x, want %#08x", got, w)
	}
}

// FuzzUpdate checks Update, a split Update and Copy against hash/crc32 on
// any input. The seeds replay in go test; run it with
// go test ./internal/crc32c -run '^$' -fuzz FuzzUpdate -fuzztime 60s.
func FuzzUpdate(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{0, 1, 15, 16, 63, 64, 65, 255, 256, 257, 511, 1024, 4099, 64 + sseBlockBytes + 5, 256 + blockBytes + 77} {
		f.Add(r.Uint32(), uint16(n/3), randBytes(r, n))
	}
	f.Add(uint32(0), uint16(0), bytes.Repeat([]byte{0xff}, 300))
	f.Fuzz(func(t *testing.T, crc uint32, split uint16, p []byte) {
		w := want(crc, p)
		if got := Update(crc, p); got != w {
			t.Fatalf("Update(%#x, len %d) = %#08x, want %#08x", crc, len(p), got, w)
		}
		s := min(int(split), len(p))
		if got := Update(Update(crc, p[:s]), p[s:]); got != w {
			t.Fatalf("Update split at %d of %d = %#08x, want %#08x", s, len(p), got, w)
		}
		dst := make([]byte, len(p))
		if got := Copy(dst, p, crc); got != w || !bytes.Equal(dst, p) {
			t.Fatalf("Copy(len %d) = %#08x (bytes equal %v), want %#08x", len(p), got, bytes.Equal(dst, p), w)
		}
		for _, k := range kernels {
			if !k.ok || len(p) < k.min {
				continue
			}
			if got := k.update(crc, p); got != w {
				t.Fatalf("%s(%#x, len %d) = %#08x, want %#08x", k.name, crc, len(p), got, w)
			}
		}
	})
}
