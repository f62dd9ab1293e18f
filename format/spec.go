package format

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/zeebo/blake3"
)

// RoPEStyle says which dimensions a rotary embedding pairs up.
// The numeric values are part of the on-disk format.
type RoPEStyle uint8

const (
	// RoPERotateHalf pairs dimension i with i+rot/2 (GPT-NeoX, HF Llama, Qwen).
	RoPERotateHalf RoPEStyle = 1
	// RoPEInterleaved pairs dimension 2i with 2i+1 (GPT-J, llama2.c).
	RoPEInterleaved RoPEStyle = 2
)

func (s RoPEStyle) String() string {
	switch s {
	case RoPERotateHalf:
		return "rotate-half"
	case RoPEInterleaved:
		return "interleaved"
	}
	return fmt.Sprintf("rope-style(%d)", uint8(s))
}

// RoPEScaling names the frequency scaling rule, as HF transformers defines
// them in modeling_rope_utils. The numeric values are part of the format.
type RoPEScaling uint8

const (
	RoPEScalingNone   RoPEScaling = 0
	RoPEScalingLinear RoPEScaling = 1 // positions divided by Factor
	RoPEScalingLlama3 RoPEScaling = 2 // Llama 3.1 wavelength-banded scaling
	RoPEScalingYaRN   RoPEScaling = 3 // YaRN ramp + attention factor
	// RoPEScalingDynamic is HF's "dynamic" NTK scaling: the base grows with
	// the length of the sequence being processed (see RoPE.OriginalMaxPos).
	RoPEScalingDynamic RoPEScaling = 4
)

func (s RoPEScaling) String() string {
	switch s {
	case RoPEScalingNone:
		return "none"
	case RoPEScalingLinear:
		return "linear"
	case RoPEScalingLlama3:
		return "llama3"
	case RoPEScalingYaRN:
		return "yarn"
	case RoPEScalingDynamic:
		return "dynamic"
	}
	return fmt.Sprintf("rope-scaling(%d)", uint8(s))
}

// RoPE is the full rotary-embedding configuration of a model. Field meanings
// follow HF transformers' rope_scaling dictionary; unused fields are zero.
type RoPE struct {
	Style RoPEStyle
	// RotaryDims is how many leading dimensions of each head are rotated
	// (partial rotary); 0 means all of HeadDim. Even, <= HeadDim.
	RotaryDims int
	Theta      float64 // base, e.g. 10000, 500000
	Scaling    RoPEScaling
	Factor     float64 // linear, llama3, yarn, dynamic
	// Llama3: low_freq_factor, high_freq_factor, original_max_position_embeddings.
	LowFreqFactor  float64
	HighFreqFactor float64
	// OriginalMaxPos is the pretraining context length: llama3's and
	// yarn's original_max_position_embeddings. For dynamic it is the length
	// M that HF's formula divides by, the config's max_position_embeddings
	// (HF reads no other field for it; a converter should store
	// rope_scaling's original_max_position_embeddings only where it equals
	// that). Sequences of at most M tokens rotate with the plain base.
	OriginalMaxPos int
	// YaRN: beta_fast, beta_slow, attention_factor (0 = HF default, from
	// Factor, Mscale and MscaleAllDim).
	BetaFast        float64
	BetaSlow        float64
	AttentionFactor float64
	// YaRNNoTruncate is HF's truncate = false: the correction range's ends
	// are used as computed, not floored and ceiled to whole pairs. The zero
	// value is HF's default (truncate = true).
	YaRNNoTruncate bool
	// Mscale and MscaleAllDim are YaRN's DeepSeek-style attention factor
	// inputs: with AttentionFactor 0 and both non-zero, the factor is
	// get_mscale(Factor, Mscale) / get_mscale(Factor, MscaleAllDim), where
	// get_mscale(s, m) = 0.1*m*ln(s)+1 for s > 1, else 1.
	Mscale       float64
	MscaleAllDim float64
}

// ModelSpec is the layout of the KV cache a model produces: everything that
// must match for a stored packet to be reusable. Its BLAKE3 fingerprint binds
// packets, artifacts and span memory to one model.
type ModelSpec struct {
	Architecture string // free text, e.g. "llama"
	Layers       int
	KVHeads      int
	HeadDim      int
	DType        DType // storage dtype of packets
	RoPE         RoPE
	// WeightsID names the weights (a hash, a checkpoint name): two models
	// of the same shape but other weights must not share packets.
	WeightsID string
}

// Limits on a ModelSpec; generous, but they bound every allocation a
// corrupt or hostile header could ask for.
const (
	MaxLayers  = 1024
	MaxKVHeads = 1024
	MaxHeadDim = 4096
	MaxNameLen = 1024 // architecture, weights id, namespace, adapter id, artifact name
)

// Validate checks that the spec describes a usable layout.
func (m *ModelSpec) Validate() error {
	switch {
	case m.Layers <= 0 || m.Layers > MaxLayers:
		return fmt.Errorf("%w: model spec: layers %d not in [1, %d]", ErrInvalidArgument, m.Layers, MaxLayers)
	case m.KVHeads <= 0 || m.KVHeads > MaxKVHeads:
		return fmt.Errorf("%w: model spec: kv heads %d not in [1, %d]", ErrInvalidArgument, m.KVHeads, MaxKVHeads)
	case m.HeadDim <= 0 || m.HeadDim > MaxHeadDim:
		return fmt.Errorf("%w: model spec: head dim %d not in [1, %d]", ErrInvalidArgument, m.HeadDim, MaxHeadDim)
	case !m.DType.Float():
		return fmt.Errorf("%w: model spec: storage dtype %v is not f32, f16 or bf16", ErrInvalidArgument, m.DType)
	case len(m.Architecture) > MaxNameLen || len(m.WeightsID) > MaxNameLen:
		return fmt.Errorf("%w: model spec: architecture or weights id longer than %d bytes", ErrInvalidArgument, MaxNameLen)
	}
	return m.RoPE.validate(m.HeadDim)
}

func (r *RoPE) validate(headDim int) error {
	bad := func(what string, args ...any) error {
		return fmt.Errorf("%w: rope: %s", ErrInvalidArgument, fmt.Sprintf(what, args...))
	}
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case r.Style != RoPERotateHalf && r.Style != RoPEInterleaved:
		return bad("unknown style %v", r.Style)
	case r.RotaryDims < 0 || r.RotaryDims > headDim || r.RotaryDims%2 != 0:
		return bad("rotary dims %d not even and in [0, %d]", r.RotaryDims, headDim)
	case headDim%2 != 0 && (r.RotaryDims == 0 || r.RotaryDims == headDim):
		return bad("odd head dim %d needs an even RotaryDims below it", headDim)
	case !finite(r.Theta) || r.Theta <= 1:
		return bad("theta %v must be finite and > 1", r.Theta)
	case !finite(r.Factor) || !finite(r.LowFreqFactor) || !finite(r.HighFreqFactor) ||
		!finite(r.BetaFast) || !finite(r.BetaSlow) || !finite(r.AttentionFactor) ||
		!finite(r.Mscale) || !finite(r.MscaleAllDim):
		return bad("non-finite scaling parameter")
	}
	switch r.Scaling {
	case RoPEScalingNone:
	case RoPEScalingLinear:
		if r.Factor <= 0 {
			return bad("linear scaling needs factor > 0, got %v", r.Factor)
		}
	case RoPEScalingLlama3:
		if r.Factor <= 0 || r.LowFreqFactor <= 0 || r.HighFreqFactor <= r.LowFreqFactor || r.OriginalMaxPos <= 0 {
			return bad("llama3 scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor, original_max_position > 0")
		}
	case RoPEScalingYaRN:
		if r.Factor <= 0 || r.OriginalMaxPos <= 0 || r.BetaFast <= 0 || r.BetaSlow <= 0 || r.AttentionFactor < 0 {
			return bad("yarn scaling needs factor, original_max_position, beta_fast, beta_slow > 0")
		}
		if r.Mscale < 0 || r.MscaleAllDim < 0 {
			return bad("yarn mscale %v and mscale_all_dim %v must be >= 0", r.Mscale, r.MscaleAllDim)
		}
	case RoPEScalingDynamic:
		if r.Factor < 1 || r.OriginalMaxPos <= 0 {
			return bad("dynamic scaling needs factor >= 1 and original_max_position > 0, got %v and %d", r.Factor, r.OriginalMaxPos)
		}
	default:
		return bad("unknown scaling %v", r.Scaling)
	}
	if r.Scaling != RoPEScalingYaRN && r.ropeExt() {
		return bad("truncate, mscale and mscale_all_dim are yarn parameters; scaling is %v", r.Scaling)
	}
	return nil
}

// ropeExt reports whether any field added after canonicalSpecVersion 1
// holds a non-default value (bits, so that -0 counts).
func (r *RoPE) ropeExt() bool {
	return r.YaRNNoTruncate || math.Float64bits(r.Mscale) != 0 || math.Float64bits(r.MscaleAllDim) != 0
}

// Rotary returns the number of rotated dimensions per head.
func (m *ModelSpec) Rotary() int {
	if m.RoPE.RotaryDims == 0 {
		return m.HeadDim
	}
	return m.RoPE.RotaryDims
}

// TokenBytes is the number of K plus V bytes one token takes in all layers.
func (m *ModelSpec) TokenBytes() int {
	return 2 * m.Layers * m.KVHeads * m.HeadDim * m.DType.Size()
}

// Fingerprint identifies a ModelSpec: BLAKE3-256 of its canonical encoding.
type Fingerprint [32]byte

func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// Short is the first 8 bytes in hex, for tables and logs.
func (f Fingerprint) Short() string { return hex.EncodeToString(f[:8]) }

// canonicalSpecVersion prefixes the canonical encoding so that a future
// change of the encoding cannot collide with today's fingerprints.
const canonicalSpecVersion = 1

// Canonical is the byte string a fingerprint is taken of: fixed-width
// little-endian fields in declaration order, strings length-prefixed, floats
// as their IEEE bits. It is stable across processes, machines and releases.
//
// The YaRN fields added later (YaRNNoTruncate, Mscale, MscaleAllDim) are
// appended after WeightsID, as the tag "rope.ext1", one byte (1 = no
// truncate) and two float64s, only when one of them is non-default: every
// spec without them keeps the fingerprint it always had (the weights id is
// length-prefixed, so the tail cannot be confused with it).
func (m *ModelSpec) Canonical() []byte {
	b := make([]byte, 0, 128+len(m.Architecture)+len(m.WeightsID))
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	f64 := func(v float64) { b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v)) }
	str := func(s string) { u32(uint32(len(s))); b = append(b, s...) }
	b = append(b, "kvstore.modelspec"...)
	u32(canonicalSpecVersion)
	str(m.Architecture)
	u32(uint32(m.Layers))
	u32(uint32(m.KVHeads))
	u32(uint32(m.HeadDim))
	b = append(b, byte(m.DType), byte(m.RoPE.Style), byte(m.RoPE.Scaling))
	u32(uint32(m.Rotary()))
	f64(m.RoPE.Theta)
	f64(m.RoPE.Factor)
	f64(m.RoPE.LowFreqFactor)
	f64(m.RoPE.HighFreqFactor)
	u32(uint32(m.RoPE.OriginalMaxPos))
	f64(m.RoPE.BetaFast)
	f64(m.RoPE.BetaSlow)
	f64(m.RoPE.AttentionFactor)
	str(m.WeightsID)
	if m.RoPE.ropeExt() {
		b = append(b, "rope.ext1"...)
		var nt byte
		if m.RoPE.YaRNNoTruncate {
			nt = 1
		}
		b = append(b, nt)
		f64(m.RoPE.Mscale)
		f64(m.RoPE.MscaleAllDim)
	}
	return b
}

// Fingerprint is BLAKE3-256 of Canonical.
func (m *ModelSpec) Fingerprint() Fingerprint { return blake3.Sum256(m.Canonical()) }

// PacketID identifies a packet: BLAKE3-256 over (namespace, model
// fingerprint, adapter id, token ids). The same document under the same
// model, adapter and namespace always gets the same id, on any machine.
type PacketID [32]byte

func (p PacketID) String() string { return hex.EncodeToString(p[:]) }

// Short is the first 8 bytes in hex, for tables and logs.
func (p PacketID) Short() string { return hex.EncodeToString(p[:8]) }

// ParsePacketID parses the 64 hex digits String returns.
func ParsePacketID(s string) (PacketID, error) {
	var p PacketID
	if len(s) != 64 {
		return p, fmt.Errorf("%w: packet id %q: want 64 hex digits", ErrInvalidArgument, s)
	}
	if _, err := hex.Decode(p[:], []byte(s)); err != nil {
		return p, fmt.Errorf("%w: packet id %q: %v", ErrInvalidArgument, s, err)
	}
	return p, nil
}

// The domain tags that open the two ids derived by scopedIDHash: they keep
// a packet id and a context id apart even when their other inputs are the
// same bytes.
const (
	packetIDDomain  = "kvstore.packet.v1"
	contextIDDomain = "kvstore.spans.v1"
)

// scopedIDHash starts the BLAKE3-256 hash a packet id and a context id share:
// domain (written bare: it is one of the fixed tags above), namespace (u64
// LE length + bytes), the 32-byte model fingerprint, then name (u64 LE
// length + bytes): the adapter id of a packet, the name of a span memory.
// The caller writes anything that follows and sums it.
func scopedIDHash(domain, namespace string, model Fingerprint, name string) *blake3.Hasher {
	h := blake3.New()
	var n [8]byte
	put := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.WriteString(s)
	}
	h.WriteString(domain)
	put(namespace)
	h.Write(model[:])
	put(name)
	return h
}

// ComputePacketID derives a packet's id: scopedIDHash of (namespace, model,
// adapterID), then the u64 token count and each token id as u32. Every
// variable-length field is length-prefixed so that no two distinct inputs
// share an encoding.
func ComputePacketID(namespace string, model Fingerprint, adapterID string, tokens []uint32) PacketID {
	h := scopedIDHash(packetIDDomain, namespace, model, adapterID)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(tokens)))
	h.Write(n[:])
	buf := make([]byte, 0, 4*min(len(tokens), 1024))
	for i := 0; i < len(tokens); i += 1024 {
		buf = buf[:0]
		for _, t := range tokens[i:min(i+1024, len(tokens))] {
			buf = binary.LittleEndian.AppendUint32(buf, t)
		}
		h.Write(buf)
	}
	var id PacketID
	copy(id[:], h.Sum(nil))
	return id
}

// CheckNamespace refuses a namespace longer than MaxNameLen bytes
// (ErrInvalidArgument): the one check of a namespace every store call
// makes before it builds a key or a header.
func CheckNamespace(ns string) error {
	if len(ns) > MaxNameLen {
		return fmt.Errorf("%w: namespace of %d bytes exceeds %d", ErrInvalidArgument, len(ns), MaxNameLen)
	}
	return nil
}
