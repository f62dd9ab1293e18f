package quality

import (
	"cmp"
	"fmt"
	"io"
	"slices"
)

// Pareto reports, for each row, whether no other row is at least as good
// on both bytes per token and KL and better on one: the rows worth
// choosing.
func (r *PacketReport) Pareto() []bool {
	out := make([]bool, len(r.Rows))
	for i, a := range r.Rows {
		out[i] = true
		for j, b := range r.Rows {
			if j != i && b.BytesPerToken <= a.BytesPerToken && b.KL <= a.KL && (b.BytesPerToken < a.BytesPerToken || b.KL < a.KL) {
				out[i] = false
				break
			}
		}
	}
	return out
}

// Markdown writes the rows as a table sorted by bytes per token, Pareto
// rows marked.
func (r *PacketReport) Markdown(w io.Writer) error {
	pareto := r.Pareto()
	idx := make([]int, len(r.Rows))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(r.Rows[a].BytesPerToken, r.Rows[b].BytesPerToken), cmp.Compare(r.Rows[a].KL, r.Rows[b].KL))
	})
	if _, err := fmt.Fprintf(w, "**%s**: %d layers x %d KV heads x head dim %d, stored %v, context %d tokens, continuation %d.\n\n"+
		"| codec | pruning | kept | bytes/token | of bf16 | mean KL (nats) | max KL | top-1 | Pareto |\n|---|---|---|---|---|---|---|---|---|\n",
		r.Name, r.Layers, r.KVHeads, r.HeadDim, r.DType, r.Context, r.Continuation); err != nil {
		return err
	}
	for _, i := range idx {
		x := r.Rows[i]
		mark := ""
		if pareto[i] {
			mark = "yes"
		}
		kept := fmt.Sprintf("%.0f%%", 100*x.Keep)
		switch x.Policy {
		case PolicyMass:
			kept = fmt.Sprintf("%.1f%% (mass %g)", 100*x.Kept, x.Keep)
		case PolicyCheck:
			kept = fmt.Sprintf("%.1f%% (probe KL <= %g)", 100*x.Kept, x.Keep)
		}
		if _, err := fmt.Fprintf(w, "| %s | %s | %s | %.1f | %.1f%% | %.2e | %.2e | %.3f | %s |\n",
			x.Setting, x.Policy, kept, x.BytesPerToken, 100*x.OfBF16, x.KL, x.MaxKL, x.Top1, mark); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}
