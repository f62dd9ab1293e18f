package llama

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/kvstore/kvstore/format"
)

// A llama2.c version-0 checkpoint, all little endian:
//
//	+---------------------------------------------------------------+
//	| dim | hidden | layers | heads | kv_heads | vocab | seq_len    |  7 x int32
//	+---------------------------------------------------------------+
//	| token_embedding [vocab][dim]                                  |
//	| rms_att [layers][dim]                                         |  float32,
//	| wq [layers][dim][dim]   wk, wv [layers][kv_dim][dim]          |  row-major
//	| wo [layers][dim][dim]   rms_ffn [layers][dim]                 |  [out][in]
//	| w1 [layers][hidden][dim]  w2 [layers][dim][hidden]  w3 (=w1)  |
//	| rms_final [dim]                                               |
//	| freq_cis_real, freq_cis_imag [seq_len][head_dim/2] (skipped)  |
//	| wcls [vocab][dim]            only when vocab < 0 in the header |
//	+---------------------------------------------------------------+
//
// A positive vocab means the classifier is the token embedding. The model
// uses interleaved RoPE, theta 10000, and RMSNorm eps 1e-5.
const checkpointHeader = 7 * 4

// Load reads a llama2.c version-0 checkpoint. The file must be exactly as
// long as its header says: a short or long file is format.ErrCorruption.
func Load(path string) (*Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("llama: load: %w", err)
	}
	m, err := parseCheckpoint(b)
	if err != nil {
		return nil, fmt.Errorf("llama: load %s: %w", path, err)
	}
	return m, nil
}

func parseCheckpoint(b []byte) (*Model, error) {
	if len(b) < checkpointHeader {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", format.ErrCorruption, len(b), checkpointHeader)
	}
	var h [7]int
	for i := range h {
		h[i] = int(int32(binary.LittleEndian.Uint32(b[4*i:])))
	}
	tied := h[5] > 0
	vocab := h[5]
	if !tied {
		vocab = -vocab
	}
	cfg := Config{Dim: h[0], Hidden: h[1], Layers: h[2], Heads: h[3], KVHeads: h[4], Vocab: vocab, SeqLen: h[6],
		RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}, NormEps: 1e-5}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: header %v: %v", format.ErrCorruption, h, err)
	}
	// Check the length before allocating: sizes are each <= 2^20, so the
	// products below fit in an int64 comfortably.
	skipped := int64(cfg.SeqLen) * int64(cfg.HeadDim()) // two tables of seq_len x head_dim/2
	want := int64(checkpointHeader) + 4*(checkpointFloats(cfg, tied)+skipped)
	if int64(len(b)) != want {
		return nil, fmt.Errorf("%w: %d bytes, header %v needs %d", format.ErrCorruption, len(b), h, want)
	}
	m, err := newModel(cfg, tied)
	if err != nil {
		return nil, err
	}
	off := checkpointHeader
	tensors := m.tensors()
	for i, t := range tensors {
		if i == len(tensors)-1 && !tied {
			off += 4 * int(skipped) // the classifier follows the old RoPE tables
		}
		for j := range t {
			t[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[off+4*j:]))
		}
		off += 4 * len(t)
	}
	return m, nil
}

// checkpointFloats counts the weights of cfg, without the RoPE tables.
func checkpointFloats(c Config, tied bool) int64 {
	d, kv, h, l := int64(c.Dim), int64(c.KVDim()), int64(c.Hidden), int64(c.Layers)
	n := int64(c.Vocab)*d + l*(2*d+2*d*d+2*kv*d+3*h*d) + d
	if !tied {
		n += int64(c.Vocab) * d
	}
	return n
}
