package reconstruct

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/kvstore/kvstore/format"
)

// BenchmarkSVD runs, side by side on the same key-like spans (a decaying
// spectrum sigma_i = 40/i plus noise 0.03, so that rank 32 keeps about 97%
// of the energy), the randomized rank-32 SVD and gonum's thin mat.SVD
// (the full decomposition, to be truncated to rank 32; SVDThin is the fair
// one, SVDFull would also build a rows x rows U). ns/op is ours;
// gonum-ns/op is gonum's, speedup is gonum's time over ours, err-ratio our
// Frobenius error over the optimal rank-32 error. B/op and allocs/op count
// both.
func BenchmarkSVD(b *testing.B) {
	for _, shape := range [][2]int{{512, 128}, {64, 128}} {
		rows, cols := shape[0], shape[1]
		b.Run(fmt.Sprintf("%dx%d", rows, cols), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(5, 6))
			a := svdTestMatrix(rng, rows, cols, keyLikeSpectrum(min(rows, cols)), 0.03)
			d := mat.NewDense(rows, cols, nil)
			for i, v := range a {
				d.Set(i/cols, i%cols, float64(v))
			}
			opts := SVDOptions{Rank: 32}
			f, err := SVD(a, rows, cols, opts)
			if err != nil {
				b.Fatal(err)
			}
			errRatio := svdError(a, f) / svdOptimalError(b, a, rows, cols, 32)
			b.ReportAllocs()
			var ours, theirs time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := SVD(a, rows, cols, opts); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				var s mat.SVD
				if !s.Factorize(d, mat.SVDThin) {
					b.Fatal("gonum svd failed")
				}
				var u, v mat.Dense
				s.UTo(&u)
				s.VTo(&v)
				ours += mid.Sub(start)
				theirs += time.Since(mid)
			}
			b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(float64(theirs.Nanoseconds())/float64(b.N), "gonum-ns/op")
			b.ReportMetric(float64(theirs)/float64(ours), "speedup")
			b.ReportMetric(errRatio, "err-ratio")
		})
	}
}

// BenchmarkReconstruct measures rank-32 reconstruction of a 512-token span
// of one 128-dim head: keys (RoPE applied in the same pass, Llama 3.1's
// rope) and values, into bf16 and f32, against a plain copy of as many
// bytes. MB/s counts the KV bytes produced.
func BenchmarkReconstruct(b *testing.B) {
	const rows, cols, rank = 512, 128, 32
	rng := rand.New(rand.NewPCG(7, 8))
	f := factorsTest(rng, rows, cols, rank)
	rope, err := NewRoPE(format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
		Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}, cols)
	if err != nil {
		b.Fatal(err)
	}
	pos := make([]int64, rows)
	for i := range pos {
		pos[i] = int64(10000 + i)
	}
	for _, dt := range []format.DType{format.DTypeBF16, format.DTypeF32} {
		out := make([]byte, rows*cols*dt.Size())
		for _, kind := range []string{"K", "V"} {
			r, p := rope, pos
			if kind == "V" {
				r, p = nil, nil
			}
			b.Run(fmt.Sprintf("%s-%v", kind, dt), func(b *testing.B) {
				b.SetBytes(int64(len(out)))
				b.ReportAllocs()
				for b.Loop() {
					if err := ReconstructBytes(out, dt, f, nil, r, p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("memcpy-%v", dt), func(b *testing.B) {
			src := make([]byte, len(out))
			b.SetBytes(int64(len(out)))
			for b.Loop() {
				copy(out, src)
			}
		})
	}
}
