package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// TTFTAssumptions are the GPU-side numbers of the TTFT model.
type TTFTAssumptions struct {
	// PeakFLOPS is the accelerator's dense bf16 peak, FLOP/s.
	PeakFLOPS float64
	// MFU are the model-FLOPs utilisations prefill is assumed to reach.
	MFU []float64
	// H2DBytesPerSec is the host-to-device copy bandwidth. Loading
	// overlaps the storage read and the copy layer by layer, so a load
	// runs at the slower of the two.
	H2DBytesPerSec float64
}

// H200 is the default: an H200 SXM (989 TFLOP/s dense bf16, no sparsity),
// prefill at 40% and 60% MFU, and 50 GB/s pinned host-to-device copies
// (PCIe Gen5 x16 is 64 GB/s raw).
var H200 = TTFTAssumptions{PeakFLOPS: 989e12, MFU: []float64{0.4, 0.6}, H2DBytesPerSec: 50e9}

// PrefillFLOPs counts the FLOPs of prefilling n tokens as one causal
// sequence: 2*params*n for the projections and MLP (every weight does one
// multiply-add per token; embeddings are counted too, which overstates
// prefill by a few percent), plus 2*layers*n^2*(q_heads*head_dim) for the
// attention scores and the weighted sum over the causal half.
func PrefillFLOPs(s Shape, n int) float64 {
	t := float64(n)
	return 2*s.Params*t + 2*float64(s.Layers)*t*t*float64(s.QHeads*s.HeadDim)
}

// TTFTRow compares loading packets with recomputing them, for one case.
type TTFTRow struct {
	Shape   string `json:"shape"`
	Tokens  int    `json:"tokens"`  // per packet
	Packets int    `json:"packets"` // loaded for one request
	Bytes   int64  `json:"bytes"`
	// FLOPs of prefilling Packets*Tokens tokens as one sequence: what the
	// loaded packets replace.
	FLOPs float64 `json:"flops"`
	// PrefillSeconds and BreakEvenGBps are per MFU of the assumptions:
	// the bandwidth at which loading takes as long as prefilling.
	PrefillSeconds []float64  `json:"prefill_s"`
	BreakEvenGBps  []float64  `json:"break_even_gb_per_s"`
	Loads          []TTFTLoad `json:"loads"`
}

// TTFTLoad is the time to load a row's bytes at one measured bandwidth.
type TTFTLoad struct {
	Store   string  `json:"store"`
	Op      string  `json:"op"` // "cold" or "warm" Get, or "assemble" (warm)
	MBps    float64 `json:"mb_per_s"`
	Seconds float64 `json:"load_s"`
}

// TTFT models every case of r for requests of each count in packets, at
// the Get bandwidths measured for kvstore and plain files, and at their
// Assemble bandwidth where it was measured for that many packets.
func TTFT(r *Report, a TTFTAssumptions, packets []int) []TTFTRow {
	var out []TTFTRow
	for _, c := range r.Cases {
		s, ok := c.shapeInfo()
		if !ok {
			continue
		}
		for _, n := range packets {
			out = append(out, c.ttft(s, a, n))
		}
	}
	return out
}

func (c *Case) shapeInfo() (Shape, bool) {
	if c.shape.Layers > 0 {
		return c.shape, true
	}
	return shapeByName(c.Shape)
}

func (c *Case) ttft(s Shape, a TTFTAssumptions, n int) TTFTRow {
	row := TTFTRow{Shape: c.Shape, Tokens: c.Tokens, Packets: n, Bytes: int64(n) * c.PacketBytes}
	row.FLOPs = PrefillFLOPs(s, n*c.Tokens)
	for _, mfu := range a.MFU {
		sec := row.FLOPs / (a.PeakFLOPS * mfu)
		row.PrefillSeconds = append(row.PrefillSeconds, sec)
		row.BreakEvenGBps = append(row.BreakEvenGBps, float64(row.Bytes)/sec/1e9)
	}
	for _, store := range []string{"kvstore", "plain"} {
		r := c.row(store)
		if r == nil {
			continue
		}
		ops := []struct {
			name string
			st   *Stat
		}{{"cold", r.GetCold}, {"warm", r.GetWarm}}
		if r.Assemble != nil && r.Assemble.Bytes == row.Bytes {
			ops = append(ops, struct {
				name string
				st   *Stat
			}{"assemble", r.Assemble})
		}
		for _, op := range ops {
			if op.st != nil && op.st.MBps > 0 {
				bw := min(op.st.MBps*1e6, a.H2DBytesPerSec)
				row.Loads = append(row.Loads, TTFTLoad{Store: store, Op: op.name, MBps: op.st.MBps,
					Seconds: float64(row.Bytes) / bw})
			}
		}
	}
	return row
}

// WriteTTFT writes the assumptions and one table of rows.
func WriteTTFT(w io.Writer, a TTFTAssumptions, rows []TTFTRow) error {
	fmt.Fprintf(w, "TTFT model: prefill FLOPs = 2*params*n + 2*layers*n^2*(q_heads*head_dim), n = packets*tokens\n")
	fmt.Fprintf(w, "  at %.0f TFLOP/s peak (H200 SXM dense bf16) and MFU %s; loads overlap the\n",
		a.PeakFLOPS/1e12, percents(a.MFU))
	fmt.Fprintf(w, "  storage read with %.0f GB/s host-to-device copies and run at the slower of the two\n",
		a.H2DBytesPerSec/1e9)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "shape\ttokens\tpackets\tKV MiB\tprefill ms %s\tbreak-even GB/s %s\tload ms at measured MB/s\t\n",
		percents(a.MFU), percents(a.MFU))
	for _, r := range rows {
		var loads []string
		for _, l := range r.Loads {
			loads = append(loads, fmt.Sprintf("%s %s %.1f", l.Store, l.Op, l.Seconds*1e3))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t\n", r.Shape, r.Tokens, r.Packets, mib(r.Bytes),
			joinf("%.1f", 1e3, r.PrefillSeconds), joinf("%.1f", 1, r.BreakEvenGBps), strings.Join(loads, ", "))
	}
	return tw.Flush()
}

func percents(xs []float64) string {
	return "(" + joinf("%.0f%%", 100, xs) + ")"
}

func joinf(f string, scale float64, xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf(f, x*scale))
	}
	return strings.Join(parts, " / ")
}
