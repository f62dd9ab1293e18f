package quality

import (
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/reconstruct"
)

// RankRow is the relative Frobenius reconstruction error at one rank,
// pooled over every factored span of every (layer, KV head).
type RankRow struct {
	Rank               int
	KPre, KPost, Value float64
}

// rankErrors measures the error of rank-r SVD factors of the spans of a
// prefilled cache, for each rank (ranks above the head dim dropped).
func rankErrors(c *llama.Cache, spans []format.Span, ranks []int) ([]RankRow, error) {
	hd, n := c.HeadDim, c.Len()
	var out []RankRow
	for _, r := range ranks {
		if r > hd {
			continue
		}
		var acc [3][2]float64 // K pre, K post, V: squared error, squared norm
		for _, kv := range c.Layers {
			for h := range c.KVHeads {
				for _, sp := range spans {
					if !sp.Factored || r > sp.Len() {
						continue
					}
					rows := func(x []float32) []float32 { return x[(h*n+sp.Start)*hd : (h*n+sp.End)*hd] }
					for i, x := range [][]float32{rows(kv.KPre), rows(kv.K), rows(kv.V)} {
						e, norm, err := svdError(x, sp.Len(), hd, r)
						if err != nil {
							return nil, err
						}
						acc[i][0] += e
						acc[i][1] += norm
					}
				}
			}
		}
		rel := func(a [2]float64) float64 { return math.Sqrt(a[0] / a[1]) }
		out = append(out, RankRow{Rank: r, KPre: rel(acc[0]), KPost: rel(acc[1]), Value: rel(acc[2])})
	}
	return out, nil
}

// svdError returns ||A - A_r||_F^2 and ||A||_F^2 for rank-r factors of a.
func svdError(a []float32, rows, cols, r int) (float64, float64, error) {
	f, err := reconstruct.SVD(a, rows, cols, reconstruct.SVDOptions{Rank: r, MaxRank: r})
	if err != nil {
		return 0, 0, err
	}
	got := make([]float32, len(a))
	if err := reconstruct.ReconstructInto(got, f, nil, nil, nil); err != nil {
		return 0, 0, err
	}
	var e, norm float64
	for i, v := range a {
		d := float64(got[i] - v)
		e += d * d
		norm += float64(v) * float64(v)
	}
	return e, norm, nil
}

// HeadRank is the spectrum of one (layer, KV head) over the whole context:
// the fewest singular components of its [tokens][head_dim] matrix that
// keep 90% and 99% of the energy, for pre-RoPE keys, post-RoPE keys and
// values; and the relative error of each at rank HeadRankProbe(head_dim).
type HeadRank struct {
	Layer, Head             int
	KPre, KPost, Value      [2]int // at 90%, 99%
	KPreErr, KPostErr, VErr float64
}

// HeadRankProbe is the rank HeadRank's errors are taken at: an eighth of
// the head dim (8 of gocode-hd64's 64), at least 1.
func HeadRankProbe(headDim int) int { return max(1, headDim/8) }

// headRanks measures every (layer, KV head) of a prefilled cache: its
// energy ranks and its relative errors at HeadRankProbe.
func headRanks(c *llama.Cache) ([]HeadRank, error) {
	hd, n := c.HeadDim, c.Len()
	var out []HeadRank
	for l, kv := range c.Layers {
		for h := range c.KVHeads {
			row := HeadRank{Layer: l, Head: h}
			for i, x := range [][]float32{kv.KPre, kv.K, kv.V} {
				a := x[h*n*hd : (h+1)*n*hd]
				ranks, err := energyRanks(a, n, hd, 0.90, 0.99)
				if err != nil {
					return nil, err
				}
				e, norm, err := svdError(a, n, hd, HeadRankProbe(hd))
				if err != nil {
					return nil, err
				}
				rel := math.Sqrt(e / norm)
				switch i {
				case 0:
					row.KPre, row.KPreErr = ranks, rel
				case 1:
					row.KPost, row.KPostErr = ranks, rel
				default:
					row.Value, row.VErr = ranks, rel
				}
			}
			out = append(out, row)
		}
	}
	return out, nil
}

// energyRanks returns, for each threshold, the fewest singular components
// of a (rows x cols) whose squared singular values reach that share of
// ||a||_F^2.
func energyRanks(a []float32, rows, cols int, th ...float64) ([2]int, error) {
	k := min(rows, cols)
	f, err := reconstruct.SVD(a, rows, cols, reconstruct.SVDOptions{Rank: k, MaxRank: k})
	if err != nil {
		return [2]int{}, err
	}
	var total float64
	for _, v := range a {
		total += float64(v) * float64(v)
	}
	var out [2]int
	for t := range out {
		var acc float64
		out[t] = f.Rank
		for i, s := range f.S {
			acc += float64(s) * float64(s)
			if acc >= th[t]*total {
				out[t] = i + 1
				break
			}
		}
	}
	return out, nil
}
