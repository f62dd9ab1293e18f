package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
)

func TestDemoTable(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "--docs", "2", "--tokens", "6", "--question", "2"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{"random-weight Llama-shaped model", "(temporary), packets in bf16",
		"packet", "tokens", "bytes", "put", "verify",
		"assemble: 2 packets, 12 tokens (24576 bytes)", "tokens recomputed: 2 of 14 (the question)", "KL(full || packets)"} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	rows := 0
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[1] == "6" && f[2] == "12288" && f[4] == "ok" {
			rows++
		}
	}
	if rows != 2 {
		t.Fatalf("want 2 packet rows of 6 tokens, 12288 bytes, verify ok:\n%s", s)
	}
}

// demoJSON runs the demo with --json and decodes its report.
func demoJSON(t *testing.T, args ...string) demoReport {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(append([]string{"--json", "demo"}, args...), &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r demoReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	return r
}

// TestDemoJSON checks the figures: every packet verified, the question
// the only tokens computed, the assembled rows within f32 rounding of each
// document prefilled at its offset, and a store in --dir that keeps the
// packets for a second run.
func TestDemoJSON(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	r := demoJSON(t, "--docs", "3", "--tokens", "5", "--question", "3", "--dtype", "f32", "--dir", dir)
	if !r.Verified || len(r.Packets) != 3 || r.Recomputed != 3 || r.FullTokens != 18 || r.AssembleTokens != 15 || r.DType != "f32" {
		t.Fatalf("report %+v", r)
	}
	if r.MaxDeltaK > 1e-5*r.MaxK || r.MaxDeltaV > 1e-5*r.MaxV || r.MaxK == 0 {
		t.Fatalf("assembled rows differ from prefill at offset: K %g of %g, V %g of %g", r.MaxDeltaK, r.MaxK, r.MaxDeltaV, r.MaxV)
	}
	if !(r.KL >= 0) {
		t.Fatalf("KL %v", r.KL)
	}
	again := demoJSON(t, "--docs", "3", "--tokens", "5", "--question", "3", "--dtype", "f32", "--dir", dir)
	for i, p := range again.Packets {
		if !p.Stored || p.ID != r.Packets[i].ID || p.Verify != "ok" {
			t.Fatalf("second run, packet %d: %+v (first run %+v)", i, p, r.Packets[i])
		}
	}
}

func TestDemoStories(t *testing.T) {
	path := testenv.ModelFile(t, "stories260K.bin")
	r := demoJSON(t, "--model", path, "--docs", "2", "--tokens", "8", "--question", "2")
	if !r.Verified || !strings.Contains(r.Model, "stories260K") || r.AssembleBytes != 16*5*4*8*2*2 {
		t.Fatalf("report %+v", r)
	}
}

func TestDemoUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"demo", "--docs", "0"}, exitUsage},
		{[]string{"demo", "--dtype", "int8"}, exitUsage},
		{[]string{"demo", "extra"}, exitUsage},
		{[]string{"demo", "--model", filepath.Join(t.TempDir(), "missing.bin")}, exitFail},
		{[]string{"demo", "--help"}, exitOK},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != c.code {
			t.Errorf("%v: exit %d, want %d (%s)", c.args, code, c.code, errb.String())
		}
	}
}

// TestDemoBinary builds the real binary and runs the demo through it.
func TestDemoBinary(t *testing.T) {
	gobin := testenv.GoToolchain(t)
	bin := filepath.Join(t.TempDir(), "kvstore")
	build := exec.Command(gobin, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--json", "demo", "--docs", "2", "--tokens", "4")
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	var r demoReport
	if err := json.Unmarshal(out, &r); err != nil || !r.Verified || len(r.Packets) != 2 || r.Recomputed != 4 {
		t.Fatalf("binary's report: %v\n%s", err, out)
	}
}

// Prefilling in chunks gives one Forward's logits and cache bit for bit,
// from position 0 and after a cache; a done context stops it before any
// chunk, and every chunk of a long prefill is shown on the progress line.
func TestDemoPrefillChunks(t *testing.T) {
	m, err := llama.Random(demoModel, 1)
	if err != nil {
		t.Fatal(err)
	}
	tokens := randomTokens(rand.New(rand.NewPCG(3, 4)), m.Vocab, 2*prefillChunk+5)
	var line bytes.Buffer
	pre := prefiller{ctx: context.Background(), m: m, p: startProgress(&line, "demo", time.Now), what: "prefill"}
	for _, c := range []struct {
		name  string
		split int // tokens prefilled before, as the cache
	}{{"from 0", 0}, {"after a cache", 7}} {
		t.Run(c.name, func(t *testing.T) {
			var before, whole *llama.Cache
			if c.split > 0 {
				for _, cache := range []**llama.Cache{&before, &whole} {
					r, err := m.Forward(tokens[:c.split], 0, nil, llama.ForwardOptions{LastOnly: true})
					if err != nil {
						t.Fatal(err)
					}
					*cache = r.Cache
				}
			}
			want, err := m.Forward(tokens[c.split:], int64(c.split), whole, llama.ForwardOptions{LastOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			got, err := pre.prefill(tokens[c.split:], int64(c.split), before)
			if err != nil {
				t.Fatal(err)
			}
			if !sameBits(got.Logits[0], want.Logits[0]) || got.Cache.Len() != want.Cache.Len() {
				t.Fatalf("logits or cache length (%d, want %d) differ", got.Cache.Len(), want.Cache.Len())
			}
			for l := range want.Cache.Layers {
				if !sameBits(got.Cache.Layers[l].K, want.Cache.Layers[l].K) || !sameBits(got.Cache.Layers[l].V, want.Cache.Layers[l].V) {
					t.Fatalf("layer %d's cache differs", l)
				}
			}
		})
	}
	if s := line.String(); !strings.Contains(s, "demo: prefill: 64/133 tokens") || !strings.Contains(s, "demo: prefill: 128/133 tokens") {
		t.Fatalf("progress line: %q", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pre.ctx = ctx
	if _, err := pre.prefill(tokens, 0, nil); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "prefill: stopped at token 0 of 133") {
		t.Fatalf("cancelled prefill: %v", err)
	}
}

// A demo of long documents draws its prefills on the progress line.
func TestDemoProgress(t *testing.T) {
	var line bytes.Buffer
	f := demoFlags{docs: 2, tokens: prefillChunk + 1, question: 2}
	r, err := demo(context.Background(), f, format.DTypeBF16, &line, startProgress(&line, "demo", time.Now))
	if err != nil || !r.Verified {
		t.Fatalf("demo: %v %+v", err, r)
	}
	for _, want := range []string{"demo: prefill document 1/2: 0/65 tokens", "demo: prefill document 2/2: 64/65 tokens",
		"demo: prefill document 2/2 at its offset: 64/65 tokens", "demo: full recompute: 128/132 tokens"} {
		if !strings.Contains(line.String(), want) {
			t.Errorf("progress lacks %q: %q", want, line.String())
		}
	}
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
