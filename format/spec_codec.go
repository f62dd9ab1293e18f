package format

import (
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/kvstore/kvstore/format/fb"
)

// EncodeModelSpec validates m and returns it as a framed catalog value (a
// KindModelSpec record holding an fb.ModelSpec). An invalid spec is
// ErrInvalidArgument.
func EncodeModelSpec(m *ModelSpec) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return Seal(KindModelSpec, buildModelSpec(m))
}

// DecodeModelSpec checks and decodes a value EncodeModelSpec wrote: frame
// CRC, then the FlatBuffer verifier, then the fields; the result passes
// ModelSpec.Validate and has the fingerprint of the spec that was encoded.
// Bad bytes are ErrCorruption, a newer format ErrVersion. It never panics.
func DecodeModelSpec(b []byte) (m *ModelSpec, err error) {
	body, err := Unseal(KindModelSpec, b)
	if err != nil {
		return nil, err
	}
	defer recoverCorruption("model spec", &err)
	return decodeModelSpecBody(body)
}

// decodeModelSpecBody verifies and decodes an unsealed model spec body.
func decodeModelSpecBody(body []byte) (*ModelSpec, error) {
	if err := verifyBuffer(body, modelSpecTable); err != nil {
		return nil, err // names the table and field
	}
	t := fb.GetRootAsModelSpec(body, 0)
	m := &ModelSpec{
		Architecture: string(t.Architecture()),
		Layers:       int(t.Layers()),
		KVHeads:      int(t.KvHeads()),
		HeadDim:      int(t.HeadDim()),
		DType:        DType(t.Dtype()),
		WeightsID:    string(t.WeightsId()),
	}
	var r fb.Rope
	if t.Rope(&r) != nil {
		m.RoPE = RoPE{
			Style:           RoPEStyle(r.Style()),
			RotaryDims:      int(r.RotaryDims()),
			Theta:           r.Theta(),
			Scaling:         RoPEScaling(r.Scaling()),
			Factor:          r.Factor(),
			LowFreqFactor:   r.LowFreqFactor(),
			HighFreqFactor:  r.HighFreqFactor(),
			OriginalMaxPos:  int(r.OriginalMaxPos()),
			BetaFast:        r.BetaFast(),
			BetaSlow:        r.BetaSlow(),
			AttentionFactor: r.AttentionFactor(),
			YaRNNoTruncate:  r.YarnNoTruncate() == 1,
			Mscale:          r.Mscale(),
			MscaleAllDim:    r.MscaleAllDim(),
		}
		if nt := r.YarnNoTruncate(); nt > 1 {
			return nil, fmt.Errorf("%w: model spec: yarn_no_truncate %d is not 0 or 1", ErrCorruption, nt)
		}
		if int64(m.RoPE.OriginalMaxPos) != r.OriginalMaxPos() {
			return nil, fmt.Errorf("%w: model spec: original max position %d does not fit an int", ErrCorruption, r.OriginalMaxPos())
		}
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%w: model spec: decoded value is invalid: %v", ErrCorruption, err)
	}
	return m, nil
}

// addFloat64 writes a float field of an open table, zero included: the
// generated RopeAddXxx skip x == 0, which would turn -0 into +0 and so
// change the spec's fingerprint.
func addFloat64(b *flatbuffers.Builder, t *tableSpec, name string, x float64) {
	b.PrependFloat64(x)
	b.Slot(t.slot(name))
}

// buildModelSpec returns the FlatBuffer body of a valid spec.
func buildModelSpec(m *ModelSpec) []byte {
	b := flatbuffers.NewBuilder(256 + len(m.Architecture) + len(m.WeightsID))
	arch := b.CreateString(m.Architecture)
	weights := b.CreateString(m.WeightsID)
	r := &m.RoPE
	fb.RopeStart(b)
	fb.RopeAddStyle(b, fb.RopeStyle(r.Style))
	fb.RopeAddRotaryDims(b, uint32(r.RotaryDims))
	addFloat64(b, ropeTable, "theta", r.Theta)
	fb.RopeAddScaling(b, fb.RopeScaling(r.Scaling))
	addFloat64(b, ropeTable, "factor", r.Factor)
	addFloat64(b, ropeTable, "low_freq_factor", r.LowFreqFactor)
	addFloat64(b, ropeTable, "high_freq_factor", r.HighFreqFactor)
	fb.RopeAddOriginalMaxPos(b, int64(r.OriginalMaxPos))
	addFloat64(b, ropeTable, "beta_fast", r.BetaFast)
	addFloat64(b, ropeTable, "beta_slow", r.BetaSlow)
	addFloat64(b, ropeTable, "attention_factor", r.AttentionFactor)
	if r.ropeExt() { // absent in specs without them: their bytes stay as they were
		var nt byte
		if r.YaRNNoTruncate {
			nt = 1
		}
		fb.RopeAddYarnNoTruncate(b, nt)
		addFloat64(b, ropeTable, "mscale", r.Mscale)
		addFloat64(b, ropeTable, "mscale_all_dim", r.MscaleAllDim)
	}
	rope := fb.RopeEnd(b)

	fb.ModelSpecStart(b)
	fb.ModelSpecAddArchitecture(b, arch)
	fb.ModelSpecAddLayers(b, uint32(m.Layers))
	fb.ModelSpecAddKvHeads(b, uint32(m.KVHeads))
	fb.ModelSpecAddHeadDim(b, uint32(m.HeadDim))
	fb.ModelSpecAddDtype(b, fb.DType(m.DType))
	fb.ModelSpecAddRope(b, rope)
	fb.ModelSpecAddWeightsId(b, weights)
	b.Finish(fb.ModelSpecEnd(b))
	return b.FinishedBytes()
}
