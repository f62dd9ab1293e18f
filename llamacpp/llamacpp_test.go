//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kvstore/kvstore/format/gguf"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/llamacpp"
	"github.com/kvstore/kvstore/store"
)

var (
	ggufMu    sync.Mutex
	ggufPaths = map[string]string{}
)

// library opens libllama from $KVSTORE_LLAMA_LIB (required in CI).
func library(t testing.TB) *llamacpp.Library {
	t.Helper()
	dir := testenv.Env(t, testenv.LibLlama, llamacpp.LibEnv)
	lib, err := llamacpp.Open(llamacpp.Options{LibDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// ggufOf converts the named test checkpoint once per process.
func ggufOf(t testing.TB, name string) string {
	t.Helper()
	src := testenv.ModelFile(t, name)
	ggufMu.Lock()
	defer ggufMu.Unlock()
	if p, ok := ggufPaths[name]; ok {
		return p
	}
	ck, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := gguf.WriteLlama2c(&buf, ck, name); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "kvstore-llamacpp-")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".gguf")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ggufPaths[name] = p
	return p
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(restartEnv); dir != "" {
		if err := restartChild(dir); err != nil {
			fmt.Fprintln(os.Stderr, "restart child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	for _, p := range ggufPaths {
		os.RemoveAll(filepath.Dir(p))
	}
	os.Exit(code)
}

// model loads the GGUF of a test checkpoint.
func model(t testing.TB, name string) *llamacpp.Model {
	t.Helper()
	lib := library(t)
	m, err := lib.LoadModel(ggufOf(t, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func newContext(t testing.TB, m *llamacpp.Model, o llamacpp.ContextOptions) *llamacpp.Context {
	t.Helper()
	c, err := m.NewContext(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func openStore(t testing.TB, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func argmax(x []float32) int32 {
	best := 0
	for i := range x {
		if x[i] > x[best] {
			best = i
		}
	}
	return int32(best)
}

// greedy decodes n tokens after the logits of the last decode, the first
// at position pos.
func greedy(t testing.TB, c *llamacpp.Context, pos, n int) []int32 {
	t.Helper()
	var out []int32
	for i := range n {
		tok := argmax(c.Logits())
		out = append(out, tok)
		if i == n-1 {
			break
		}
		if err := c.Decode(0, pos+i, []int32{tok}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func ints(x []int32) []int {
	out := make([]int, len(x))
	for i, v := range x {
		out[i] = int(v)
	}
	return out
}

func u32s(x []int32) []uint32 {
	out := make([]uint32, len(x))
	for i, v := range x {
		out[i] = uint32(v)
	}
	return out
}

// goPrompt is real Go source as byte tokens after BOS, for gocode-hd64.
func goPrompt(s string) []int32 {
	out := []int32{1}
	for _, b := range []byte(s) {
		out = append(out, int32(b))
	}
	return out
}

// TestGreedyMatchesReference: llama.cpp on the GGUF of each test
// checkpoint decodes the greedy ids lab/llama decodes.
func TestGreedyMatchesReference(t *testing.T) {
	for _, c := range []struct {
		name   string
		prompt []int32
		n      int
	}{
		{"stories260K.bin", []int32{1}, 25},
		{"gocode-hd64.bin", goPrompt("package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println("), 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref, err := llama.Load(testenv.ModelFile(t, c.name))
			if err != nil {
				t.Fatal(err)
			}
			want, err := ref.Greedy(ints(c.prompt), c.n)
			if err != nil {
				t.Fatal(err)
			}
			ctx := newContext(t, model(t, c.name), llamacpp.ContextOptions{Ctx: 256, Cache: llamacpp.CacheF32})
			if err := ctx.Decode(0, 0, c.prompt); err != nil {
				t.Fatal(err)
			}
			got := ints(greedy(t, ctx, len(c.prompt), c.n))
			if len(want) > c.n { // Greedy may return the prompt too
				want = want[len(want)-c.n:]
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("id %d: llama.cpp %v, lab/llama %v", i, got, want)
				}
			}
			t.Logf("%d ids agree: %v", len(got), got)
		})
	}
}

// TestDecodeEmbd: decoding the token embedding rows (read from the GGUF)
// gives the logits decoding the token ids gives.
func TestDecodeEmbd(t *testing.T) {
	m := model(t, "stories260K.bin")
	f, closeFile, err := gguf.Open(m.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFile()
	var table []byte
	for i, tn := range f.Tensors {
		if tn.Name == "token_embd.weight" {
			if table, err = f.TensorData(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	prompt := []int32{1, 400, 30, 200, 7}
	var embd []float32
	for _, tok := range prompt {
		row := table[int(tok)*m.Embd*4 : (int(tok)+1)*m.Embd*4]
		for j := range m.Embd {
			embd = append(embd, math.Float32frombits(binary.LittleEndian.Uint32(row[4*j:])))
		}
	}
	o := llamacpp.ContextOptions{Ctx: 64, Cache: llamacpp.CacheF32}
	a, b := newContext(t, m, o), newContext(t, m, o)
	if err := a.Decode(0, 0, prompt); err != nil {
		t.Fatal(err)
	}
	if err := b.DecodeEmbd(0, 0, embd); err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(a.Logits(), b.Logits()); d > 1e-5 {
		t.Fatalf("embeddings and token ids give logits %.3g apart", d)
	}
	if err := b.DecodeEmbd(0, 5, embd[:m.Embd-1]); !errors.Is(err, llamacpp.ErrInvalidArgument) {
		t.Fatalf("a partial row: %v", err)
	}
}
