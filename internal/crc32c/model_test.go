package crc32c

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// A Go model of the kernels' folding, with a software carry-less multiply:
// it runs on every architecture and checks the method and the constant
// formula for many lane counts and distances, apart from the assembly.

// reg128 is a 128-bit register as two qwords, low first (16 bytes loaded
// little-endian).
type reg128 [2]uint64

// clmul64 returns the 128-bit carry-less product of a and b.
func clmul64(a, b uint64) reg128 {
	var r reg128
	for i := range 64 {
		if b>>i&1 != 0 {
			r[0] ^= a << i
			if i > 0 {
				r[1] ^= a >> (64 - i)
			}
		}
	}
	return r
}

// fold128 is FOLDZ on one lane: a.lo*k.lo ^ a.hi*k.hi ^ data.
func fold128(a reg128, k [2]uint64, data reg128) reg128 {
	l, h := clmul64(a[0], k[0]), clmul64(a[1], k[1])
	return reg128{l[0] ^ h[0] ^ data[0], l[1] ^ h[1] ^ data[1]}
}

func load128(p []byte) reg128 {
	return reg128{binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:])}
}

// modelUpdate is Update by folding lanes 16-byte accumulators (len(p) >=
// 16*lanes): the main loop folds each by 128*lanes bits, the lanes are
// folded into the last at once, each by its own distance, the rest folds
// 16 bytes at a time, and the last 128 bits and the tail go through the
// table-driven CRC from a zero register.
func modelUpdate(crc uint32, p []byte, lanes int) uint32 {
	return modelHybrid(crc, p, lanes, hybridShape{})
}

// hybridShape is a hybrid block: steps folding steps of the accumulators,
// then streams streams of streamLen bytes summed apart (zero: no blocks).
// joined says how the streams join the accumulators: false as in the sse
// kernel, true as in the avx512 one (modelHybrid says how).
type hybridShape struct {
	steps, streams, streamLen int
	joined                    bool
}

// rawCRC is the CRC register of p from a zero register, no inversions.
func rawCRC(p []byte) uint32 { return ^want(^uint32(0), p) }

// streamLane is the accumulator (of lanes) that stream i of a block joins
// in the avx512 kernel's way: two a lane, from the first of the last four
// (Z3's lanes).
func streamLane(i, lanes int) int { return min(max(lanes-4, 0)+i/2, lanes-1) }

// streamLaneExp is the power of x that stream i's register c is
// multiplied by to join its lane, streamLane(i, lanes), where the lane
// stands: before the streams, which the accumulators fold over later.
// c*x^(e-65) is its term in the block's last lane, after that fold (e its
// distance in bits to the block's end); the lane ends 128*(lanes-1-lane)
// bits before the streams, which are s bits long.
func streamLaneExp(h hybridShape, i, lanes int) int {
	e := 8 * (h.streams - 1 - i) * h.streamLen
	s := 8 * h.streams * h.streamLen
	return e - s - 128*(lanes-1-streamLane(i, lanes)) - 65
}

// modelHybrid is modelUpdate with the kernels' hybrid blocks of shape h
// first, while a whole block fits. Each stream's register c is summed
// from zero. The sse kernel's way: the accumulators fold forward over the
// streams and each c joins the last lane as the product c * x^(e-65) mod
// P, e its distance in bits to the block's end. The avx512 kernel's way
// (h.joined): each c joins the lane streamLane as the product with
// x^streamLaneExp, and the fold over the streams is left to the next
// block's first step, which folds by that much more (or, after the last
// block, to a fold of its own).
func modelHybrid(crc uint32, p []byte, lanes int, h hybridShape) uint32 {
	acc := make([]reg128, lanes)
	for i := range acc {
		acc[i] = load128(p[16*i:])
	}
	acc[0][0] ^= uint64(^crc)
	p = p[16*lanes:]
	step := 16 * lanes
	if h.steps > 0 {
		block := h.steps*step + h.streams*h.streamLen
		over := 8 * h.streams * h.streamLen // the fold over the streams
		pending := false                    // h.joined: it is still to do
		for ; len(p) >= block; p = p[block:] {
			for s := range h.steps {
				k := foldPair(128 * lanes)
				if s == 0 && pending {
					k = foldPair(128*lanes + over)
				}
				for i := range acc {
					acc[i] = fold128(acc[i], k, load128(p[s*step+16*i:]))
				}
			}
			if !h.joined {
				for i := range acc {
					acc[i] = fold128(acc[i], foldPair(over), reg128{})
				}
			}
			streams := p[h.steps*step:]
			for i := range h.streams {
				c := rawCRC(streams[i*h.streamLen : (i+1)*h.streamLen])
				e := 8 * (h.streams - 1 - i) * h.streamLen
				l, x := lanes-1, e-65
				if h.joined {
					l, x = streamLane(i, lanes), streamLaneExp(h, i, lanes)
				}
				t := clmul64(uint64(c), rev64(xPowNaive(x)))
				acc[l][0] ^= t[0]
				acc[l][1] ^= t[1]
			}
			pending = h.joined
		}
		if pending {
			for i := range acc {
				acc[i] = fold128(acc[i], foldPair(over), reg128{})
			}
		}
	}
	for ; len(p) >= step; p = p[step:] {
		for i := range acc {
			acc[i] = fold128(acc[i], foldPair(128*lanes), load128(p[16*i:]))
		}
	}
	a := acc[lanes-1]
	for i := range lanes - 1 {
		a = fold128(acc[i], foldPair(128*(lanes-1-i)), a)
	}
	for ; len(p) >= 16; p = p[16:] {
		a = fold128(a, foldPair(128), load128(p))
	}
	var last [16]byte
	binary.LittleEndian.PutUint64(last[:], a[0])
	binary.LittleEndian.PutUint64(last[8:], a[1])
	return want(^rawCRC(last[:]), p)
}

// TestModel checks the folding model against hash/crc32 for 1 to 16 lanes
// (16 lanes are the 256 bytes of the AVX-512 main loop).
func TestModel(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, lanes := range []int{1, 2, 3, 4, 8, 16} {
		for range 20 {
			p := randBytes(r, 16*lanes+r.IntN(2000))
			seed := r.Uint32()
			if got, w := modelUpdate(seed, p, lanes), want(seed, p); got != w {
				t.Fatalf("model with %d lanes (len %d) = %#08x, want %#08x", lanes, len(p), got, w)
			}
		}
	}
}

// TestModelHybrid checks the hybrid blocks' merge in the model, for
// several shapes besides the kernels' own, against hash/crc32.
func TestModelHybrid(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	shapes := []struct {
		lanes int
		h     hybridShape
	}{
		{4, hybridShape{1, 1, 8, false}},
		{4, hybridShape{3, 2, 24, false}},
		{16, hybridShape{2, 6, 40, false}},
		{4, hybridShape{4, 6, 80, false}},
		{4, hybridShape{blockIters, blockStreams, blockStream, false}}, // sse
		{16, hybridShape{blockIters, blockStreams, blockStream, false}},
		{4, hybridShape{1, 1, 8, true}},
		{4, hybridShape{3, 2, 24, true}},
		{16, hybridShape{2, 6, 40, true}},
		{4, hybridShape{4, 7, 80, true}},
		{16, hybridShape{blockIters, blockStreams, blockStream, true}}, // avx512
	}
	for _, c := range shapes {
		t.Run(fmt.Sprintf("%d lanes %+v", c.lanes, c.h), func(t *testing.T) {
			block := c.h.steps*16*c.lanes + c.h.streams*c.h.streamLen
			for range 6 {
				p := randBytes(r, 16*c.lanes+r.IntN(3*block+100))
				seed := r.Uint32()
				if got, w := modelHybrid(seed, p, c.lanes, c.h), want(seed, p); got != w {
					t.Fatalf("model %d lanes %+v (len %d) = %#08x, want %#08x", c.lanes, c.h, len(p), got, w)
				}
			}
		})
	}
}
