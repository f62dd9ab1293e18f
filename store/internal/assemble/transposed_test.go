package assemble

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestScatterTransposed checks scatterTransposed against the element by
// element definition, dst[(h*hd+d)*T + t0+t] = src[t*hd+d], for 2- and
// 4-byte elements, head dims and token counts that are and are not whole
// blocks, and runs longer than a tile; bytes outside the run stay as
// they were. scatterElements, the big-endian fallback, is checked too.
func TestScatterTransposed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, es := range []int{2, 4} {
		for _, hd := range []int{1, 3, 4, 6, 12, 64} {
			for _, k := range []int{1, 3, 4, 5, 31, 32, 33, 70} {
				t.Run(fmt.Sprintf("es=%d/hd=%d/k=%d", es, hd, k), func(t *testing.T) {
					const H, h, t0 = 3, 1, 5
					T := t0 + k + 2
					g := &geom{heads: H, tokens: T, rowBytes: hd * es, esize: es}
					src := make([]byte, k*hd*es+es) // one element more than the run
					for i := range src {
						src[i] = byte(rng.Uint32())
					}
					dst := make([]byte, H*hd*T*es)
					for i := range dst {
						dst[i] = 0xab
					}
					want := bytes.Clone(dst)
					for tk := range k {
						for d := range hd {
							o := ((h*hd+d)*T + t0 + tk) * es
							copy(want[o:o+es], src[(tk*hd+d)*es:])
						}
					}
					be := bytes.Clone(dst) // the big-endian fallback, tested here too
					scatterElements(be, src, es, h, t0, k, hd, T)
					if !bytes.Equal(be, want) {
						t.Error("scatterElements differs from the definition")
					}
					scatterTransposed(g, dst, src, h, t0, k)
					if !bytes.Equal(dst, want) {
						for i := range dst {
							if dst[i] != want[i] {
								t.Fatalf("byte %d (element %d): %#x, want %#x", i, i/es, dst[i], want[i])
							}
						}
					}
				})
			}
		}
	}
}
