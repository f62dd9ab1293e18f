//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp

import (
	"fmt"
	"sync"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/gguf"
)

// DType is the store dtype of packets saved from a cache of type c.
func (c CacheType) DType() format.DType {
	if c == CacheF32 {
		return format.DTypeF32
	}
	return format.DTypeF16
}

type specCache struct {
	mu    sync.Mutex
	specs map[format.DType]*format.ModelSpec
}

// Spec is the ModelSpec of packets saved from m's caches of type c: read
// from the GGUF's metadata (gguf.File.Spec), its weights id hashing the
// file's tensors, and checked against the shape llama.cpp reports. It is
// computed once per dtype. Packets saved for one GGUF are refused for any
// other (store.ErrModelMismatch or ErrNotFound).
func (m *Model) Spec(c CacheType) (*format.ModelSpec, error) {
	m.specs.mu.Lock()
	defer m.specs.mu.Unlock()
	dt := c.DType()
	if s, ok := m.specs.specs[dt]; ok {
		return s, nil
	}
	f, closeFile, err := gguf.Open(m.path)
	if err != nil {
		return nil, fmt.Errorf("llamacpp: model spec: %w", err)
	}
	defer closeFile()
	s, err := f.Spec(dt)
	if err != nil {
		return nil, fmt.Errorf("llamacpp: model spec of %s: %w", m.path, err)
	}
	if s.Layers != m.Layers || s.KVHeads != m.KVHeads || s.HeadDim*m.Heads != m.Embd {
		return nil, fmt.Errorf("%w: %s: GGUF metadata says %d layers x %d kv heads x %d dims, llama.cpp %d x %d x %d",
			ErrInvalidArgument, m.path, s.Layers, s.KVHeads, s.HeadDim, m.Layers, m.KVHeads, m.HeadDim())
	}
	if m.specs.specs == nil {
		m.specs.specs = map[format.DType]*format.ModelSpec{}
	}
	m.specs.specs[dt] = s
	return s, nil
}
