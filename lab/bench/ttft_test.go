package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestPrefillFLOPs(t *testing.T) {
	// Llama-3.1-8B, 1000 tokens: 2*8.03e9*1000 + 2*32*1000^2*4096.
	want := 1.606e13 + 2.62144e11
	if got := PrefillFLOPs(Llama8B, 1000); math.Abs(got-want)/want > 1e-9 {
		t.Fatalf("PrefillFLOPs(llama8b, 1000) = %g, want %g", got, want)
	}
	// The attention term is quadratic: doubling n more than doubles FLOPs.
	if PrefillFLOPs(Llama8B, 8000) <= 2*PrefillFLOPs(Llama8B, 4000) {
		t.Fatal("no quadratic attention term")
	}
}

func TestTTFT(t *testing.T) {
	c := &Case{Shape: "llama8b", Tokens: 1000, PacketBytes: Llama8B.PacketBytes(1000), Rows: []*Row{
		{Store: "kvstore", GetCold: &Stat{MBps: 1000}, GetWarm: &Stat{MBps: 1e6},
			Assemble: &Stat{MBps: 2000, Bytes: 10 * Llama8B.PacketBytes(1000)}},
		{Store: "plain", GetCold: &Stat{MBps: 2000}},
		{Store: "pebble", GetCold: &Stat{MBps: 5}},
	}}
	rows := TTFT(&Report{Cases: []*Case{c}}, H200, []int{1, 10})
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	r := rows[1]
	if r.Bytes != 10*c.PacketBytes || r.FLOPs != PrefillFLOPs(Llama8B, 10000) {
		t.Fatalf("10 packets: %d bytes, %g FLOPs", r.Bytes, r.FLOPs)
	}
	wantPrefill := r.FLOPs / (989e12 * 0.4)
	if math.Abs(r.PrefillSeconds[0]-wantPrefill) > 1e-12 {
		t.Fatalf("prefill %v s, want %v", r.PrefillSeconds[0], wantPrefill)
	}
	if math.Abs(r.BreakEvenGBps[0]-float64(r.Bytes)/wantPrefill/1e9) > 1e-9 {
		t.Fatalf("break-even %v GB/s", r.BreakEvenGBps[0])
	}
	if len(r.Loads) != 4 || r.Loads[2].Op != "assemble" { // pebble is not modelled
		t.Fatalf("loads %+v, want kvstore cold, warm, assemble and plain cold", r.Loads)
	}
	if len(rows[0].Loads) != 3 {
		t.Fatalf("1 packet: loads %+v, want no assemble of 10", rows[0].Loads)
	}
	if got, want := r.Loads[0].Seconds, float64(r.Bytes)/1e9; math.Abs(got-want) > 1e-9 {
		t.Fatalf("kvstore cold load %v s, want %v", got, want)
	}
	// A warm read faster than the host-to-device copy is capped by it.
	if got, want := r.Loads[1].Seconds, float64(r.Bytes)/H200.H2DBytesPerSec; math.Abs(got-want) > 1e-9 {
		t.Fatalf("kvstore warm load %v s, want the H2D-bound %v", got, want)
	}
	var b bytes.Buffer
	if err := WriteTTFT(&b, H200, rows); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"989 TFLOP/s", "40% / 60%", "kvstore cold", "llama8b"} {
		if !strings.Contains(b.String(), s) {
			t.Fatalf("TTFT table lacks %q:\n%s", s, b.String())
		}
	}
}
