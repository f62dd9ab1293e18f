//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp

import (
	"fmt"
	"os"
	"runtime"
	"sync"
)

// Model is a loaded GGUF model. It is safe for concurrent use by contexts;
// Close it after every context made from it is closed.
type Model struct {
	lib  *Library
	ptr  uintptr
	path string

	Layers  int // llama_model_n_layer
	Heads   int // query heads
	KVHeads int // llama_model_n_head_kv
	Embd    int // llama_model_n_embd
	Vocab   int // llama_vocab_n_tokens

	specs specCache
	once  sync.Once
}

// LoadModel loads the GGUF at path on the CPU (no layers offloaded).
func (lib *Library) LoadModel(path string) (*Model, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w: load model: %v", ErrInvalidArgument, err)
	}
	p := lib.modelDefaultParams()
	p.nGPULayers = 0
	lib.takeLog()
	ptr := lib.modelLoad(path, p)
	if ptr == 0 {
		return nil, fmt.Errorf("%w: load model %s: %s", ErrLlama, path, lib.takeLog())
	}
	m := &Model{lib: lib, ptr: ptr, path: path,
		Layers: int(lib.modelNLayer(ptr)), Heads: int(lib.modelNHead(ptr)), KVHeads: int(lib.modelNHeadKV(ptr)),
		Embd: int(lib.modelNEmbd(ptr)), Vocab: int(lib.vocabNTokens(lib.modelGetVocab(ptr)))}
	return m, nil
}

// Path is the GGUF file the model was loaded from.
func (m *Model) Path() string { return m.path }

// HeadDim is Embd / Heads.
func (m *Model) HeadDim() int { return m.Embd / m.Heads }

// Close frees the model. It is idempotent. Close every context made from
// it first: llama.cpp's contexts use the model's memory.
func (m *Model) Close() {
	m.once.Do(func() { m.lib.modelFree(m.ptr); runtime.KeepAlive(m) })
}
