//go:build (linux || darwin) && (amd64 || arm64)

// Command llamacpp is the smallest server-side use of kvstore with
// llama.cpp: documents are prefilled once, each alone, and stored as
// packets; a request assembles the packets it needs behind each other
// straight into a llama.cpp sequence (no document token is recomputed),
// prefills only the question, and generates the answer.
//
//	export KVSTORE_LLAMA_LIB=$(scripts/install-libllama.sh)
//	go run ./examples/llamacpp                     # gocode-hd64.bin from $KVSTORE_TESTDATA or ../shared/testdata
//	go run ./examples/llamacpp -model m.gguf -dir /var/lib/kv
//
// A llama2.c checkpoint (.bin) is converted to GGUF first; any GGUF of an
// architecture format/gguf knows works, its tokens fed as ids (the example
// model is byte-level, so its text is its bytes).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/gguf"
	"github.com/kvstore/kvstore/llamacpp"
	"github.com/kvstore/kvstore/store"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.model, "model", defaultModel(), "GGUF model, or a llama2.c checkpoint to convert (default: gocode-hd64.bin in $KVSTORE_TESTDATA, else in ../shared/testdata)")
	flag.StringVar(&cfg.lib, "lib", "", "directory of libllama*.so (default $KVSTORE_LLAMA_LIB)")
	flag.StringVar(&cfg.dir, "dir", "", "store directory (default: a temporary one, removed afterwards)")
	flag.IntVar(&cfg.answer, "answer", 48, "tokens to generate")
	flag.Parse()
	if _, err := run(os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "llamacpp:", err)
		os.Exit(1)
	}
}

type config struct {
	model, lib, dir string
	answer          int
}

// result is what run did, for tests.
type result struct {
	IDs    []format.PacketID
	Cells  int   // cells assembled from packets
	Answer []int // generated ids
}

// documents are what a server stores once; question is a request over them.
var documents = []string{
	"// Max returns the larger of a and b.\nfunc Max(a, b int) int {\n\tif a > b {\n\t\treturn a\n\t}\n\treturn b\n}\n",
	"// Min returns the smaller of a and b.\nfunc Min(a, b int) int {\n\tif a < b {\n\t\treturn a\n\t}\n\treturn b\n}\n",
	"// Abs returns the absolute value of x.\nfunc Abs(x int) int {\n\tif x < 0 {\n\t\treturn -x\n\t}\n\treturn x\n}\n",
}

const question = "// Clamp returns x limited to [lo, hi].\nfunc Clamp(x, lo, hi int) int {\n\t"

func tokens(s string) []int32 {
	out := make([]int32, len(s))
	for i := range len(s) {
		out[i] = int32(s[i])
	}
	return out
}

// defaultModel is gocode-hd64.bin in $KVSTORE_TESTDATA, else in
// ../shared/testdata (where the repository's test models sit, seen from
// its root).
func defaultModel() string {
	dir := os.Getenv("KVSTORE_TESTDATA")
	if dir == "" {
		dir = filepath.Join("..", "shared", "testdata")
	}
	return filepath.Join(dir, "gocode-hd64.bin")
}

func run(w io.Writer, cfg config) (*result, error) {
	if st, err := os.Stat(cfg.model); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("model %q not found: pass -model with a GGUF or a llama2.c checkpoint (.bin), or set KVSTORE_TESTDATA to the directory of gocode-hd64.bin", cfg.model)
	}
	tmp, err := os.MkdirTemp("", "kvstore-llamacpp-example-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	path, err := asGGUF(cfg.model, tmp)
	if err != nil {
		return nil, err
	}
	lib, err := llamacpp.Open(llamacpp.Options{LibDir: cfg.lib})
	if err != nil {
		return nil, err
	}
	m, err := lib.LoadModel(path)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	ctx, err := m.NewContext(llamacpp.ContextOptions{Ctx: 1024, Cache: llamacpp.CacheF32})
	if err != nil {
		return nil, err
	}
	defer ctx.Close()
	dir := cfg.dir
	if dir == "" {
		dir = filepath.Join(tmp, "store")
	}
	db, err := store.Open(dir, nil)
	if err != nil {
		return nil, err
	}
	defer db.Close()

	// Once per document: prefill it alone from position 0 and store it.
	r := &result{}
	var lens []int
	for i, d := range documents {
		toks := tokens(d)
		if i == 0 {
			toks = append([]int32{1}, toks...) // BOS begins the request
		}
		ctx.Remove(0, -1, -1)
		if err := ctx.Decode(0, 0, toks); err != nil {
			return nil, err
		}
		id, err := llamacpp.Save(context.Background(), db, "docs", ctx, 0, u32s(toks))
		if err != nil {
			return nil, err
		}
		r.IDs = append(r.IDs, id)
		lens = append(lens, len(toks))
		fmt.Fprintf(w, "stored document %d: %d tokens as packet %s\n", i, len(toks), id.Short())
	}

	// Per request: assemble the packets behind each other into sequence 0
	// (each re-rotated to its offset), prefill the question, generate.
	start := time.Now()
	items := make([]store.AssembleItem, len(r.IDs))
	var off int64
	for i, id := range r.IDs {
		items[i] = store.AssembleItem{ID: id, Offset: off}
		off += int64(lens[i])
	}
	l, err := llamacpp.Load(context.Background(), db, "docs", ctx, 0, items, nil)
	if err != nil {
		return nil, err
	}
	r.Cells = l.Cells
	loaded := time.Since(start)
	q := tokens(question)
	if err := ctx.Decode(0, l.Next, q); err != nil {
		return nil, err
	}
	pos := l.Next + len(q)
	for range cfg.answer {
		next := argmax(ctx.Logits())
		r.Answer = append(r.Answer, int(next))
		if err := ctx.Decode(0, pos, []int32{next}); err != nil {
			return nil, err
		}
		pos++
	}
	var ans bytes.Buffer
	for _, t := range r.Answer {
		ans.WriteByte(byte(t))
	}
	fmt.Fprintf(w, "request: %d cells from %d packets loaded in %v, %d question tokens prefilled\n",
		l.Cells, len(items), loaded.Round(time.Microsecond), len(q))
	fmt.Fprintf(w, "answer:\n%s%s\n", question, strings.TrimRight(ans.String(), "\n"))
	return r, nil
}

// asGGUF returns path, or a GGUF converted from it into dir when it is a
// llama2.c checkpoint.
func asGGUF(path, dir string) (string, error) {
	if !strings.HasSuffix(path, ".bin") {
		return path, nil
	}
	ck, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), ".bin")+".gguf")
	f, err := os.Create(out)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := gguf.WriteLlama2c(f, ck, filepath.Base(path)); err != nil {
		return "", err
	}
	return out, f.Close()
}

func u32s(x []int32) []uint32 {
	out := make([]uint32, len(x))
	for i, v := range x {
		out[i] = uint32(v)
	}
	return out
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
