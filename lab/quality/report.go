package quality

import (
	"fmt"
	"io"
)

// Markdown writes the report as the tables of docs/quality.md.
func (r *Report) Markdown(w io.Writer) error {
	p := func(f string, args ...any) { fmt.Fprintf(w, f, args...) }
	p("### %s\n\n", r.Name)
	p("%d layers x %d KV heads x head dim %d; context %d tokens, continuation %d; %d spans (%d factored, mean %.1f tokens), %d anchors, d' = %d. ",
		r.Layers, r.KVHeads, r.HeadDim, r.Context, r.Continuation, r.Spans, r.Factored, r.MeanSpan, r.Anchors, r.ProjDim)
	p("Stored factors: mean rank %.1f (K), %.1f (V), %.0f%% of the factored rows' bytes. Full attention in the decode loop equals Forward bit for bit: %v.\n\n",
		r.StoredRankK, r.StoredRankV, 100*r.FactorShare, r.FullMatchesForward)
	p("Relative Frobenius error of rank-r factors (all factored spans, layers and KV heads pooled):\n\n")
	p("| rank | K pre-RoPE (stored) | K post-RoPE | V |\n|---:|---:|---:|---:|\n")
	for _, k := range r.Ranks {
		p("| %d | %.4f | %.4f | %.4f |\n", k.Rank, k.KPre, k.KPost, k.Value)
	}
	p("\nPer (layer, KV head), whole context: components keeping 90%% / 99%% of the energy, and the relative error at rank %d:\n\n", HeadRankProbe(r.HeadDim))
	p("| layer | KV head | K pre-RoPE | K post-RoPE | V | err K pre | err K post | err V |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, h := range r.Heads {
		p("| %d | %d | %d / %d | %d / %d | %d / %d | %.3f | %.3f | %.3f |\n", h.Layer, h.Head, h.KPre[0], h.KPre[1],
			h.KPost[0], h.KPost[1], h.Value[0], h.Value[1], h.KPreErr, h.KPostErr, h.VErr)
	}
	p("\nKL(p_full || p_method) in nats, mean over the continuation (top-1 agreement; GPU rows used per (layer, KV head) as a share of the context):\n\n")
	p("| budget | window | top-surprisal | span | span+sum |\n|---:|---:|---:|---:|---:|\n")
	byBudget := map[float64]map[string]Row{}
	var budgets []float64
	for _, row := range r.Rows {
		if byBudget[row.Budget] == nil {
			byBudget[row.Budget] = map[string]Row{}
			budgets = append(budgets, row.Budget)
		}
		byBudget[row.Budget][row.Method] = row
	}
	for _, b := range budgets {
		p("| %.0f%% |", 100*b)
		for _, name := range []string{MethodWindow, MethodTop, MethodSpan, MethodSpanSum} {
			row, ok := byBudget[b][name]
			if !ok {
				p(" - |")
				continue
			}
			over := ""
			if row.OverBudget {
				over = " **over budget**"
			}
			p(" %.4f (%.0f%%; %.1f%%)%s |", row.KL, 100*row.Top1, 100*row.Rows, over)
		}
		p("\n")
	}
	p("\nFactor bytes zoomed in per decode step (all layers and heads): ")
	for i, b := range budgets {
		if i > 0 {
			p(", ")
		}
		p("%.0f%%: %.0f B (span), %.0f B (span+sum)", 100*b, byBudget[b][MethodSpan].Bytes, byBudget[b][MethodSpanSum].Bytes)
	}
	_, err := fmt.Fprintf(w, ".\n\n")
	return err
}
