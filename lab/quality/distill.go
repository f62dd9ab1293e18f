package quality

import (
	"math"
	"slices"

	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/router"
)

// windows returns, per budget, the distillation window of lab/router's KL
// term over span memory s of the prefilled context pc (surprisal h): the
// span memory's resident rows and every zoomable span's rows not
// resident, as the stored memory holds them (reconstructed from their
// factors), the summary keys the routers score, the layer's zoom budget,
// and cont decoded teacher-forced with full attention (its rows and the
// teacher's next-token distribution after each token). The memory is the
// one span memory (MethodSpan, MethodSpanTrained) decodes with at that
// budget.
func (c *LongConfig) windows(s *spanStore, h []float32, pc *llama.Cache, cont []int, budgets []float64) ([]router.Window, error) {
	m, n := c.Model, pc.Len()
	full, err := m.Forward(cont, int64(n), pc.Clone(), llama.ForwardOptions{})
	if err != nil {
		return nil, err
	}
	teacher := make([][]float64, len(cont))
	for i, z := range full.Logits {
		teacher[i] = llama.Probs(z)
	}
	hd, total := s.hd, full.Cache.Len()
	contRows := func(x []float32, g int) []float32 {
		return append([]float32(nil), x[(g*total+n)*hd:(g*total+total)*hd]...)
	}
	meta := s.meta
	var wins []router.Window
	for _, f := range budgets {
		b := max(1, int(math.Floor(f*float64(n))))
		sm := newSpanMethod(s, h, b, c.Span.AnchorShare, false)
		win := router.Window{Pos: int64(n), Cont: append([]int(nil), cont...), Teacher: teacher, Zoom: sm.zoom,
			Ends: slices.Clone(s.rt.Ends)}
		for l := range meta.Layers {
			kv := full.Cache.Layers[l]
			for g := range meta.KVHeads {
				res, err := sm.groupRows(l, g, nil)
				if err != nil {
					return nil, err
				}
				sums, err := s.r.Summaries(l, g)
				if err != nil {
					return nil, err
				}
				wg := router.WindowGroup{K: res.k, V: res.v, ContK: contRows(kv.K, g), ContV: contRows(kv.V, g),
					SpanK: make([][]float32, len(meta.Spans)), SpanV: make([][]float32, len(meta.Spans))}
				for sp, info := range meta.Spans {
					for _, v := range sums[sp].Key {
						wg.Keys = append(wg.Keys, float64(v))
					}
					if sm.rt.SpanTokens[sp] == 0 {
						continue
					}
					rec, err := s.span(l, g, sp)
					if err != nil {
						return nil, err
					}
					for t := info.Start; t < info.End; t++ {
						if !sm.resident[t] {
							j := t - info.Start
							wg.SpanK[sp] = append(wg.SpanK[sp], rec.k[j*hd:(j+1)*hd]...)
							wg.SpanV[sp] = append(wg.SpanV[sp], rec.v[j*hd:(j+1)*hd]...)
						}
					}
				}
				win.Groups = append(win.Groups, wg)
			}
		}
		wins = append(wins, win)
	}
	return wins, nil
}
