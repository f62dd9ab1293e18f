//go:build (linux || darwin) && (amd64 || arm64)

// Command adapterpacket stores one document as a KV Packet adapter packet
// through the public adapter API, twice: prefilled by the pure-Go
// reference Llama (lab/llama) and by llama.cpp (llamacpp.AdapterModel),
// both behind adapter.Model. It creates a store, builds an untrained
// adapter with adapter.Init from each model (the same embedding matrix
// gives the same adapter), stores it for both models (adapter.Put), makes
// the packets with adapter.Packet, puts them, reads them back and checks
// that the two agree.
//
//	export KVSTORE_LLAMA_LIB=$(scripts/install-libllama.sh)
//	go run ./examples/adapterpacket                    # gocode-hd64.bin from $KVSTORE_TESTDATA or ../shared/testdata
//	go run ./examples/adapterpacket -model stories260K.bin -hide
//
// The model is a llama2.c checkpoint (.bin): lab/llama loads it and
// format/gguf converts it to the GGUF llama.cpp loads. Document tokens are
// the text's bytes (both test models take byte ids).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/gguf"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/llamacpp"
	"github.com/kvstore/kvstore/store"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.model, "model", defaultModel(), "llama2.c checkpoint (.bin) (default: gocode-hd64.bin in $KVSTORE_TESTDATA, else in ../shared/testdata)")
	flag.StringVar(&cfg.lib, "lib", "", "directory of libllama*.so (default $KVSTORE_LLAMA_LIB)")
	flag.StringVar(&cfg.dir, "dir", "", "store directory (default: a temporary one, removed afterwards)")
	flag.StringVar(&cfg.doc, "doc", "func Max(a, b int) int {\n\tif a > b {\n\t\treturn a\n\t}\n\treturn b\n}\n", "the document's text")
	flag.IntVar(&cfg.header, "header", 2, "adapter header rows")
	flag.IntVar(&cfg.trailer, "trailer", 2, "adapter trailer rows")
	flag.BoolVar(&cfg.hide, "hide", false, "hide the header: prefill it, keep only the document's and trailer's rows")
	flag.Float64Var(&cfg.tol, "tol", 1e-4, "largest |K or V difference| / largest |value| the two packets may differ by")
	flag.Parse()
	if err := run(os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "adapterpacket:", err)
		os.Exit(1)
	}
}

type config struct {
	model, lib, dir, doc string
	header, trailer      int
	hide                 bool
	tol                  float64
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

const namespace = "adapterpacket-example"

// errDisagree: the two packets differ by more than the tolerance.
var errDisagree = errors.New("the packets of lab/llama and llama.cpp disagree")

func run(w io.Writer, cfg config) error {
	if st, err := os.Stat(cfg.model); err != nil || !st.Mode().IsRegular() || !strings.HasSuffix(cfg.model, ".bin") {
		return fmt.Errorf("model %q: not a llama2.c checkpoint (.bin) on disk: pass -model, or set KVSTORE_TESTDATA to the directory of gocode-hd64.bin", cfg.model)
	}
	tmp, err := os.MkdirTemp("", "kvstore-adapterpacket-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	// The reference model: lab/llama's *llama.Model is an adapter.Model.
	ref, err := llama.Load(cfg.model)
	if err != nil {
		return err
	}
	refSpec := ref.Spec(format.DTypeF32, "adapterpacket-example "+filepath.Base(cfg.model))

	// llama.cpp: a context's sequence 0 as an adapter.Model.
	ggufPath, err := toGGUF(cfg.model, tmp)
	if err != nil {
		return err
	}
	lib, err := llamacpp.Open(llamacpp.Options{LibDir: cfg.lib})
	if err != nil {
		return err
	}
	cm, err := lib.LoadModel(ggufPath)
	if err != nil {
		return err
	}
	defer cm.Close()
	lc, err := cm.NewContext(llamacpp.ContextOptions{Ctx: 512, Cache: llamacpp.CacheF32})
	if err != nil {
		return err
	}
	defer lc.Close()
	cpp, err := llamacpp.NewAdapterModel(lc, 0, nil)
	if err != nil {
		return err
	}
	cppSpec, err := cm.Spec(llamacpp.CacheF32)
	if err != nil {
		return err
	}

	dir := cfg.dir
	if dir == "" {
		dir = filepath.Join(tmp, "store")
	}
	db, err := store.Open(dir, nil)
	if err != nil {
		return err
	}
	defer db.Close()

	// An untrained adapter, drawn from the embedding columns' statistics.
	a, err := adapter.Init(ref, cfg.header, cfg.trailer, 1)
	if err != nil {
		return err
	}
	a.HideHeader = cfg.hide
	b, err := adapter.Init(cpp, cfg.header, cfg.trailer, 1)
	if err != nil {
		return err
	}
	b.HideHeader = cfg.hide
	aid := a.ID()
	fmt.Fprintf(w, "adapter %s: %d header rows (hidden %v), %d trailer rows; adapter.Init through llama.cpp gives the same adapter: %v\n",
		aid, a.HeaderRows(), a.HideHeader, a.TrailerRows(), b.ID() == aid)

	doc := make([]int, len(cfg.doc))
	for i := range len(cfg.doc) {
		doc[i] = int(cfg.doc[i])
	}
	models := []struct {
		name  string
		model adapter.Model
		spec  *format.ModelSpec
	}{{"lab/llama", ref, refSpec}, {"llama.cpp", cpp, cppSpec}}
	var keys, values [2][][]float32
	for i, m := range models {
		fp := m.spec.Fingerprint()
		if err := adapter.Put(db, fp, aid, a); err != nil {
			return err
		}
		p, err := adapter.Packet(m.model, m.spec, namespace, aid, a, doc)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		id, err := db.Put(context.Background(), p)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		// Read both back: the adapter and the packet.
		got, err := adapter.Get(db, fp, aid)
		if err != nil {
			return err
		}
		if got.ID() != aid {
			return fmt.Errorf("%s: the store gave back adapter %s, not %s", m.name, got.ID(), aid)
		}
		if keys[i], values[i], err = readPacket(db, fp, id, w, m.name); err != nil {
			return err
		}
	}

	for _, kv := range []struct {
		name string
		x    [2][][]float32
	}{{"K", keys}, {"V", values}} {
		var diff, scale float64
		for l := range kv.x[0] {
			if len(kv.x[0][l]) != len(kv.x[1][l]) {
				return fmt.Errorf("%w: layer %d %s: %d and %d values", errDisagree, l, kv.name, len(kv.x[0][l]), len(kv.x[1][l]))
			}
			for j, v := range kv.x[0][l] {
				diff = max(diff, math.Abs(float64(v)-float64(kv.x[1][l][j])))
				scale = max(scale, math.Abs(float64(v)))
			}
		}
		rel := diff / scale
		fmt.Fprintf(w, "%s rows: max |difference| %.3g, max |value| %.3g, relative %.3g (tolerance %g)\n", kv.name, diff, scale, rel, cfg.tol)
		if !(rel <= cfg.tol) {
			return fmt.Errorf("%w: %s rows differ by %.3g relative", errDisagree, kv.name, rel)
		}
	}
	fmt.Fprintln(w, "the two packets agree")
	return nil
}

// readPacket gets packet id and returns its keys and values in float32,
// saying what it holds on w.
func readPacket(db *store.DB, fp format.Fingerprint, id format.PacketID, w io.Writer, name string) (k, v [][]float32, err error) {
	view, err := db.Get(context.Background(), namespace, fp, id)
	if err != nil {
		return nil, nil, err
	}
	defer view.Release()
	h := view.Header()
	fmt.Fprintf(w, "%s packet %s: %d rows = %d header + %d document + %d trailer, adapter %s\n",
		name, id.Short(), h.Tokens, h.HeaderTokens, len(h.TokenIDs), h.TrailerTokens, h.AdapterID)
	for l := range view.Layers() {
		kb, vb, err := view.Layer(l)
		if err != nil {
			return nil, nil, err
		}
		kf, vf := make([]float32, len(kb)/h.DType.Size()), make([]float32, len(vb)/h.DType.Size())
		if err := format.ToF32(kf, kb, h.DType); err != nil {
			return nil, nil, err
		}
		if err := format.ToF32(vf, vb, h.DType); err != nil {
			return nil, nil, err
		}
		k, v = append(k, kf), append(v, vf)
	}
	return k, v, nil
}

// toGGUF converts the llama2.c checkpoint at path to a GGUF in dir.
func toGGUF(path, dir string) (string, error) {
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
