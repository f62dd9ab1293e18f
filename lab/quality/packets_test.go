package quality

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
)

// checkPacketReport asserts the properties a packet sweep must have on any
// model: lossless codecs cost exactly raw's KL (whatever the pruning) in
// fewer bytes; int8 beats int4 on KL and loses on bytes; keeping more
// tokens lowers KL for each policy (averaged over codecs); unpruned packets
// beat every pruned one.
func checkPacketReport(t *testing.T, r *PacketReport) {
	t.Helper()
	type key struct {
		c      format.Codec
		policy string
		keep   float64
	}
	rows := map[key]PacketRow{}
	for _, x := range r.Rows {
		rows[key{x.Codec, x.Policy, x.Keep}] = x
	}
	if len(rows) != 4*(1+3*3) {
		t.Fatalf("%d distinct rows, want 40", len(rows))
	}
	for k, x := range rows {
		if k.c != format.CodecShuffleZstd {
			continue
		}
		raw := rows[key{format.CodecRaw, k.policy, k.keep}]
		if x.KL != raw.KL || x.BytesPerToken > raw.BytesPerToken {
			t.Errorf("%s %v: shuffle-zstd KL %v, %v B/token; raw %v, %v", k.policy, k.keep, x.KL, x.BytesPerToken, raw.KL, raw.BytesPerToken)
		}
	}
	none := func(c format.Codec) PacketRow { return rows[key{c, PolicyNone, 1}] }
	if i8, i4 := none(format.CodecInt8), none(format.CodecInt4); !(i8.KL < i4.KL && i8.BytesPerToken > i4.BytesPerToken) {
		t.Errorf("int8 KL %v, %v B; int4 KL %v, %v B", i8.KL, i8.BytesPerToken, i4.KL, i4.BytesPerToken)
	}
	if raw := none(format.CodecRaw); raw.OfBF16 != 1 || !(raw.KL >= 0 && raw.KL < 0.01) {
		t.Errorf("raw bf16: %v of bf16 bytes, KL %v", raw.OfBF16, raw.KL)
	}
	for _, p := range []string{PolicyRandom, PolicyTOVA, PolicyAnchors} {
		mean := func(f float64) float64 {
			var s float64
			for _, c := range []format.Codec{format.CodecRaw, format.CodecShuffleZstd, format.CodecInt8, format.CodecInt4} {
				s += rows[key{c, p, f}].KL
			}
			return s / 4
		}
		if !(mean(0.75) < mean(0.25)) {
			t.Errorf("%s: mean KL keeping 75%% %v, 25%% %v", p, mean(0.75), mean(0.25))
		}
	}
	for k, x := range rows {
		if k.policy != PolicyNone && x.KL <= none(k.c).KL {
			t.Errorf("%v %s %v: KL %v not above unpruned %v", k.c, k.policy, k.keep, x.KL, none(k.c).KL)
		}
	}
	var b bytes.Buffer
	if err := r.Markdown(&b); err != nil || strings.Count(b.String(), "\n| ") != 41 {
		t.Fatalf("markdown: %v\n%s", err, b.String())
	}
}

func TestPacketsStories(t *testing.T) {
	m, err := llama.Load(testenv.ModelFile(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := RunPackets(PacketConfig{Name: "stories260K", Model: m, Context: 96, Continuation: 8, BOS: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	checkPacketReport(t, r)
}

// TestPacketsRandomHD128 runs a narrower model than RandomHD128 (one KV
// head of 128 dims, rotate-half with llama3 scaling), small enough for CI
// under -race.
func TestPacketsRandomHD128(t *testing.T) {
	cfg := RandomHD128
	cfg.Dim, cfg.Hidden, cfg.Heads, cfg.KVHeads, cfg.Vocab = 256, 256, 2, 1, 128
	m, err := llama.Random(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := RunPackets(PacketConfig{Name: "random", Model: m, Context: 40, Continuation: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	checkPacketReport(t, r)
}

// TestPacketsLowRank measures low-rank packets on the narrow random model
// of TestPacketsRandomHD128: rank 4 stores fewer bytes than rank 16 and
// loses more; at full rank (128 >= the 40 tokens) chunks cost at most
// raw's bytes (raw where the factors are larger, less where a head has
// fewer than 40 independent rows) and about raw's KL (rounding only).
// Rows are named by setting.
func TestPacketsLowRank(t *testing.T) {
	cfg := RandomHD128
	cfg.Dim, cfg.Hidden, cfg.Heads, cfg.KVHeads, cfg.Vocab = 256, 256, 2, 1, 128
	m, err := llama.Random(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := RunPackets(PacketConfig{Name: "random", Model: m, Context: 40, Continuation: 4, Seed: 1, Keeps: []float64{0.5},
		Codecs: []format.Codec{format.CodecRaw}, LowRank: []codec.Options{{Rank: 4}, {Rank: 16}, {Rank: 128}}})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]PacketRow{}
	for _, x := range r.Rows {
		if x.Policy == PolicyNone {
			rows[x.Setting] = x
		}
	}
	r4, r16, full, raw := rows["lowrank r4"], rows["lowrank r16"], rows["lowrank r128"], rows["raw"]
	if len(r.Rows) != 4*(1+3) || len(rows) != 4 || r4.Codec != format.CodecLowRank {
		t.Fatalf("%d rows, unpruned settings %v", len(r.Rows), rows)
	}
	if !(r4.BytesPerToken < r16.BytesPerToken && r16.BytesPerToken < raw.BytesPerToken && r4.KL > r16.KL) {
		t.Errorf("rank 4: %v B/token, KL %v; rank 16: %v B/token, KL %v; raw %v B/token", r4.BytesPerToken, r4.KL, r16.BytesPerToken, r16.KL, raw.BytesPerToken)
	}
	if !(full.KL < 2*raw.KL && full.KL < r16.KL && full.BytesPerToken <= raw.BytesPerToken) {
		t.Errorf("full rank: KL %v, %v B/token; raw: KL %v, %v B/token", full.KL, full.BytesPerToken, raw.KL, raw.BytesPerToken)
	}
	var b bytes.Buffer
	if err := r.Markdown(&b); err != nil || !strings.Contains(b.String(), "| lowrank r16 | none |") {
		t.Fatalf("markdown: %v\n%s", err, b.String())
	}
}

// TestPacketsAdaptive runs the per-packet policies on the narrow random
// model of TestPacketsRandomHD128. window-check with a bound no probe can
// miss keeps the ladder's least fraction, and is then the window policy
// at that fraction, row for row; with a bound no probe meets it keeps
// every row and costs what the unpruned packet does. tova-mass keeps more
// rows for a larger share, at least MassMin of them, and a share of 1
// keeps every row the votes touch. The split prefill (Observe) leaves the
// unpruned KL at the f32 cache's.
func TestPacketsAdaptive(t *testing.T) {
	cfg := RandomHD128
	cfg.Dim, cfg.Hidden, cfg.Heads, cfg.KVHeads, cfg.Vocab = 256, 256, 2, 1, 128
	m, err := llama.Random(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	const n = 48
	r, err := RunPackets(PacketConfig{Name: "random", Model: m, Context: n, Continuation: 4, Seed: 1, Observe: 8, TOVAQueries: 8,
		Codecs: []format.Codec{format.CodecRaw}, Policies: []string{PolicyWindow}, Keeps: []float64{0.25},
		Mass: []float64{0.5, 0.9}, MassMin: 0.25, Check: []float64{1e9, -1}, CheckProbe: 8})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[[2]string]PacketRow{}
	for _, x := range r.Rows {
		rows[[2]string{x.Policy, fmt.Sprint(x.Keep)}] = x
	}
	if len(rows) != 6 {
		t.Fatalf("%d distinct rows, want 6: %v", len(rows), r.Rows)
	}
	whole, win := rows[[2]string{PolicyNone, "1"}], rows[[2]string{PolicyWindow, "0.25"}]
	loose, tight := rows[[2]string{PolicyCheck, "1e+09"}], rows[[2]string{PolicyCheck, "-1"}]
	if loose.Kept != win.Kept || loose.KL != win.KL || loose.BytesPerToken != win.BytesPerToken {
		t.Errorf("window-check, loose bound: kept %v, KL %v, %v B; window 25%%: kept %v, KL %v, %v B", loose.Kept, loose.KL, loose.BytesPerToken, win.Kept, win.KL, win.BytesPerToken)
	}
	if tight.Kept != 1 || tight.KL != whole.KL || tight.BytesPerToken != whole.BytesPerToken {
		t.Errorf("window-check, tight bound: kept %v, KL %v, %v B; unpruned KL %v, %v B", tight.Kept, tight.KL, tight.BytesPerToken, whole.KL, whole.BytesPerToken)
	}
	m5, m9 := rows[[2]string{PolicyMass, "0.5"}], rows[[2]string{PolicyMass, "0.9"}]
	if !(m5.Kept >= 0.25 && m5.Kept <= m9.Kept && m9.Kept < 1) {
		t.Errorf("tova-mass kept %v at 0.5, %v at 0.9: want at least 0.25, growing, below 1", m5.Kept, m9.Kept)
	}
	if !(whole.KL >= 0 && whole.KL < 1e-3) {
		t.Errorf("unpruned raw KL %v", whole.KL)
	}
}
