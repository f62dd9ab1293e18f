package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/kvstore/kvstore/format"
)

// Metadata keys of a KV packet file. Every value is a string, as
// safetensors requires; numbers are decimal, lists and the model spec JSON.
const (
	MetaLayout        = "kvstore.layout"         // LayoutKV
	MetaModel         = "kvstore.model"          // the model spec, JSON (modelJSON)
	MetaFingerprint   = "kvstore.fingerprint"    // hex; checked against the spec when present
	MetaNamespace     = "kvstore.namespace"      //
	MetaAdapterID     = "kvstore.adapter_id"     //
	MetaHeaderTokens  = "kvstore.header_tokens"  // adapter rows before the document
	MetaTrailerTokens = "kvstore.trailer_tokens" // adapter rows after it
	MetaTokenIDs      = "kvstore.token_ids"      // JSON array of the document's token ids
	MetaBasePosition  = "kvstore.base_position"  // where the packet was prefilled (informational)
	MetaPacketID      = "kvstore.packet_id"      // hex; checked when present
	// LayoutKV is MetaLayout's value in files EncodeKV writes.
	LayoutKV = "kv-packet/1"
	// Tensor names.
	NameKV        = "kv"           // [2, L, 1, H, S, D]: K then V
	NamePositions = "position_ids" // [1, S] int64: the keys' positions
)

// KV is one packet's KV cache as a safetensors file carries it.
type KV struct {
	Model         format.ModelSpec
	Namespace     string
	AdapterID     string
	HeaderTokens  int
	TrailerTokens int
	TokenIDs      []uint32
	// BasePosition is MetaBasePosition: where the packet was first
	// prefilled. KeyPosition is the position the keys in K are rotated
	// for at row 0 (position_ids[0]); a kvstore export has it at 0.
	BasePosition int64
	KeyPosition  int64
	// K[l] and V[l] are layer l's [H][S][D] in Model.DType.
	K, V [][]byte
}

// Tokens is the number of rows S.
func (kv *KV) Tokens() int { return kv.HeaderTokens + len(kv.TokenIDs) + kv.TrailerTokens }

// modelJSON is the model spec in MetaModel.
type modelJSON struct {
	Architecture string   `json:"architecture"`
	Layers       int      `json:"layers"`
	KVHeads      int      `json:"kv_heads"`
	HeadDim      int      `json:"head_dim"`
	DType        string   `json:"dtype"`
	WeightsID    string   `json:"weights_id"`
	RoPE         ropeJSON `json:"rope"`
}

type ropeJSON struct {
	Style           string  `json:"style"`
	RotaryDims      int     `json:"rotary_dims"`
	Theta           float64 `json:"theta"`
	Scaling         string  `json:"scaling"`
	Factor          float64 `json:"factor"`
	LowFreqFactor   float64 `json:"low_freq_factor"`
	HighFreqFactor  float64 `json:"high_freq_factor"`
	OriginalMaxPos  int     `json:"original_max_position_embeddings"`
	BetaFast        float64 `json:"beta_fast"`
	BetaSlow        float64 `json:"beta_slow"`
	AttentionFactor float64 `json:"attention_factor"`
	// The YaRN fields added later (format.RoPE.YaRNNoTruncate, Mscale,
	// MscaleAllDim): written, all three, only when one is set, so older
	// specs' metadata is unchanged.
	YaRNNoTruncate *bool    `json:"yarn_no_truncate,omitempty"`
	Mscale         *float64 `json:"mscale,omitempty"`
	MscaleAllDim   *float64 `json:"mscale_all_dim,omitempty"`
}

func specJSON(m *format.ModelSpec) modelJSON {
	r := m.RoPE
	j := modelJSON{
		Architecture: m.Architecture, Layers: m.Layers, KVHeads: m.KVHeads, HeadDim: m.HeadDim,
		DType: m.DType.String(), WeightsID: m.WeightsID,
		RoPE: ropeJSON{Style: r.Style.String(), RotaryDims: r.RotaryDims, Theta: r.Theta, Scaling: r.Scaling.String(),
			Factor: r.Factor, LowFreqFactor: r.LowFreqFactor, HighFreqFactor: r.HighFreqFactor, OriginalMaxPos: r.OriginalMaxPos,
			BetaFast: r.BetaFast, BetaSlow: r.BetaSlow, AttentionFactor: r.AttentionFactor},
	}
	if r.YaRNNoTruncate || math.Float64bits(r.Mscale) != 0 || math.Float64bits(r.MscaleAllDim) != 0 {
		j.RoPE.YaRNNoTruncate, j.RoPE.Mscale, j.RoPE.MscaleAllDim = &r.YaRNNoTruncate, &r.Mscale, &r.MscaleAllDim
	}
	return j
}

func (j *modelJSON) spec() (format.ModelSpec, error) {
	dt, err := format.ParseDType(j.DType)
	if err != nil {
		return format.ModelSpec{}, corrupt("%s: %v", MetaModel, err)
	}
	r := j.RoPE
	m := format.ModelSpec{Architecture: j.Architecture, Layers: j.Layers, KVHeads: j.KVHeads, HeadDim: j.HeadDim,
		DType: dt, WeightsID: j.WeightsID,
		RoPE: format.RoPE{RotaryDims: r.RotaryDims, Theta: r.Theta, Factor: r.Factor,
			LowFreqFactor: r.LowFreqFactor, HighFreqFactor: r.HighFreqFactor, OriginalMaxPos: r.OriginalMaxPos,
			BetaFast: r.BetaFast, BetaSlow: r.BetaSlow, AttentionFactor: r.AttentionFactor}}
	if r.YaRNNoTruncate != nil {
		m.RoPE.YaRNNoTruncate = *r.YaRNNoTruncate
	}
	if r.Mscale != nil {
		m.RoPE.Mscale = *r.Mscale
	}
	if r.MscaleAllDim != nil {
		m.RoPE.MscaleAllDim = *r.MscaleAllDim
	}
	for _, s := range []format.RoPEStyle{format.RoPERotateHalf, format.RoPEInterleaved} {
		if s.String() == r.Style {
			m.RoPE.Style = s
		}
	}
	for _, s := range []format.RoPEScaling{format.RoPEScalingNone, format.RoPEScalingLinear, format.RoPEScalingLlama3, format.RoPEScalingYaRN, format.RoPEScalingDynamic} {
		if s.String() == r.Scaling {
			m.RoPE.Scaling = s
		}
	}
	if r.Scaling != "" && m.RoPE.Scaling.String() != r.Scaling {
		return m, corrupt("%s: unknown rope scaling %q", MetaModel, r.Scaling)
	}
	if err := m.Validate(); err != nil {
		return m, corrupt("%s: %v", MetaModel, err)
	}
	return m, nil
}

// dtypeOf maps a storage dtype to its safetensors name.
func dtypeOf(d format.DType) DType {
	switch d {
	case format.DTypeF32:
		return F32
	case format.DTypeF16:
		return F16
	case format.DTypeBF16:
		return BF16
	}
	return ""
}

// EncodeKV lays kv out as a File: "kv" [2, L, 1, H, S, D] (a copy of K
// then V) and "position_ids" [1, S] = KeyPosition.., plus the metadata.
func EncodeKV(kv *KV) (*File, error) {
	m := &kv.Model
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("safetensors: kv: %w", err)
	}
	s := kv.Tokens()
	n := m.KVHeads * s * m.HeadDim * m.DType.Size()
	if len(kv.K) != m.Layers || len(kv.V) != m.Layers || s <= 0 || kv.HeaderTokens < 0 || kv.TrailerTokens < 0 {
		return nil, invalid("kv: %d K and %d V layers, %d tokens, for a %d-layer model", len(kv.K), len(kv.V), s, m.Layers)
	}
	data := make([]byte, 0, 2*m.Layers*n)
	for _, half := range [][][]byte{kv.K, kv.V} {
		for l, b := range half {
			if len(b) != n {
				return nil, invalid("kv: layer %d: %d bytes, want %d", l, len(b), n)
			}
			data = append(data, b...)
		}
	}
	pos := make([]byte, 8*s)
	for i := range s {
		binary.LittleEndian.PutUint64(pos[8*i:], uint64(kv.KeyPosition+int64(i)))
	}
	meta, err := kvMetadata(kv)
	if err != nil {
		return nil, err
	}
	shape := []uint64{2, uint64(m.Layers), 1, uint64(m.KVHeads), uint64(s), uint64(m.HeadDim)}
	return &File{Metadata: meta, Tensors: []Tensor{
		{Name: NameKV, DType: dtypeOf(m.DType), Shape: shape, Data: data},
		{Name: NamePositions, DType: I64, Shape: []uint64{1, uint64(s)}, Data: pos},
	}}, nil
}

func kvMetadata(kv *KV) (map[string]string, error) {
	spec, err := json.Marshal(specJSON(&kv.Model))
	if err != nil {
		return nil, invalid("kv: model spec: %v", err)
	}
	ids, _ := json.Marshal(kv.TokenIDs)
	if kv.TokenIDs == nil {
		ids = []byte("[]")
	}
	fp := kv.Model.Fingerprint()
	return map[string]string{
		MetaLayout: LayoutKV, MetaModel: string(spec), MetaFingerprint: fp.String(),
		MetaNamespace: kv.Namespace, MetaAdapterID: kv.AdapterID,
		MetaHeaderTokens: strconv.Itoa(kv.HeaderTokens), MetaTrailerTokens: strconv.Itoa(kv.TrailerTokens),
		MetaTokenIDs: string(ids), MetaBasePosition: strconv.FormatInt(kv.BasePosition, 10),
		MetaPacketID: format.ComputePacketID(kv.Namespace, fp, kv.AdapterID, kv.TokenIDs).String(),
	}, nil
}
