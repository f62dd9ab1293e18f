package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kvstore/kvstore/format"
)

// DecodeKV reads a packet's cache from f. It accepts:
//
//   - "kv" [2, L, 1, H, S, D] (K then V), or per-layer "k.{l}" and "v.{l}"
//     tensors of shape [1, H, S, D] or [H, S, D], one pair for every layer;
//   - optionally "position_ids" [1, S] or [S], int64, consecutive and >= 0
//     (KeyPosition is its first value; 0 when absent);
//   - no other tensor.
//
// The dtype must be the model spec's storage dtype. Metadata MetaModel and
// MetaTokenIDs are required; the other keys default to empty or 0; a
// MetaFingerprint or MetaPacketID that disagrees with the spec is
// corruption. K and V alias f's tensors.
func DecodeKV(f *File) (*KV, error) {
	kv, err := kvFromMetadata(f.Metadata)
	if err != nil {
		return nil, err
	}
	if err := kv.tensors(f); err != nil {
		return nil, err
	}
	return kv, nil
}

func kvFromMetadata(meta map[string]string) (*KV, error) {
	spec, ok := meta[MetaModel]
	if !ok {
		return nil, corrupt("metadata has no %s (the model spec)", MetaModel)
	}
	var j modelJSON
	dec := json.NewDecoder(strings.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, corrupt("%s: %v", MetaModel, err)
	}
	m, err := j.spec()
	if err != nil {
		return nil, err
	}
	kv := &KV{Model: m, Namespace: meta[MetaNamespace], AdapterID: meta[MetaAdapterID]}
	if fp, ok := meta[MetaFingerprint]; ok && fp != m.Fingerprint().String() {
		return nil, corrupt("%s %s does not match the model spec's %s", MetaFingerprint, fp, m.Fingerprint())
	}
	ids, ok := meta[MetaTokenIDs]
	if !ok {
		return nil, corrupt("metadata has no %s", MetaTokenIDs)
	}
	if err := json.Unmarshal([]byte(ids), &kv.TokenIDs); err != nil {
		return nil, corrupt("%s: %v", MetaTokenIDs, err)
	}
	if err := kv.counts(meta); err != nil {
		return nil, err
	}
	id := format.ComputePacketID(kv.Namespace, m.Fingerprint(), kv.AdapterID, kv.TokenIDs)
	if want, ok := meta[MetaPacketID]; ok && want != id.String() {
		return nil, corrupt("%s %s does not match the computed %s", MetaPacketID, want, id)
	}
	return kv, nil
}

// counts parses the adapter token counts and the base position.
func (kv *KV) counts(meta map[string]string) error {
	num := func(key string, lo, hi int64) (int64, error) {
		s, ok := meta[key]
		if !ok {
			return 0, nil
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < lo || v > hi {
			return 0, corrupt("%s %q: want an integer in [%d, %d]", key, s, lo, hi)
		}
		return v, nil
	}
	h, err := num(MetaHeaderTokens, 0, math.MaxUint32)
	if err != nil {
		return err
	}
	t, err := num(MetaTrailerTokens, 0, math.MaxUint32)
	if err != nil {
		return err
	}
	if kv.BasePosition, err = num(MetaBasePosition, 0, math.MaxInt64); err != nil {
		return err
	}
	kv.HeaderTokens, kv.TrailerTokens = int(h), int(t)
	if s := h + t + int64(len(kv.TokenIDs)); s <= 0 || s > math.MaxUint32 {
		return corrupt("%d rows: want 1 to %d", s, uint32(math.MaxUint32))
	}
	return nil
}

// tensors finds K and V and the positions in f.
func (kv *KV) tensors(f *File) error {
	m := &kv.Model
	s := uint64(kv.Tokens())
	want := dtypeOf(m.DType)
	row := []uint64{uint64(m.KVHeads), s, uint64(m.HeadDim)}
	used := 0
	if t := f.Tensor(NameKV); t != nil {
		used++
		shape := append([]uint64{2, uint64(m.Layers), 1}, row...)
		if t.DType != want || !slices.Equal(t.Shape, shape) {
			return corrupt("tensor %s: %s %v, want %s %v", NameKV, t.DType, t.Shape, want, shape)
		}
		n := len(t.Data) / (2 * m.Layers)
		for l := range 2 * m.Layers {
			b := t.Data[l*n : (l+1)*n : (l+1)*n]
			if l < m.Layers {
				kv.K = append(kv.K, b)
			} else {
				kv.V = append(kv.V, b)
			}
		}
	} else {
		for l := range m.Layers {
			k, err := layerTensor(f, "k."+strconv.Itoa(l), want, row)
			if err != nil {
				return err
			}
			v, err := layerTensor(f, "v."+strconv.Itoa(l), want, row)
			if err != nil {
				return err
			}
			kv.K, kv.V = append(kv.K, k), append(kv.V, v)
		}
		used += 2 * m.Layers
	}
	if t := f.Tensor(NamePositions); t != nil {
		used++
		if err := kv.positions(t, s); err != nil {
			return err
		}
	}
	if used != len(f.Tensors) {
		return corrupt("%d tensors, of which %d are not part of a KV packet", len(f.Tensors), len(f.Tensors)-used)
	}
	return nil
}

// layerTensor returns the data of a per-layer tensor [1, H, S, D] or [H, S, D].
func layerTensor(f *File, name string, dt DType, row []uint64) ([]byte, error) {
	t := f.Tensor(name)
	if t == nil {
		return nil, corrupt("no tensor %q (and no %q)", name, NameKV)
	}
	if t.DType != dt || !(slices.Equal(t.Shape, row) || slices.Equal(t.Shape, append([]uint64{1}, row...))) {
		return nil, corrupt("tensor %s: %s %v, want %s [1 %d %d %d]", name, t.DType, t.Shape, dt, row[0], row[1], row[2])
	}
	return t.Data, nil
}

// positions checks position_ids: int64, [1, S] or [S], p0, p0+1, ... >= 0.
func (kv *KV) positions(t *Tensor, s uint64) error {
	if t.DType != I64 || !(slices.Equal(t.Shape, []uint64{1, s}) || slices.Equal(t.Shape, []uint64{s})) {
		return corrupt("tensor %s: %s %v, want I64 [1 %d]", NamePositions, t.DType, t.Shape, s)
	}
	p0 := int64(binary.LittleEndian.Uint64(t.Data))
	if p0 < 0 || p0 > math.MaxInt64-int64(s) {
		return corrupt("tensor %s starts at %d", NamePositions, p0)
	}
	for i := range int(s) {
		if p := int64(binary.LittleEndian.Uint64(t.Data[8*i:])); p != p0+int64(i) {
			return corrupt("tensor %s: position %d at row %d, want consecutive positions from %d", NamePositions, p, i, p0)
		}
	}
	kv.KeyPosition = p0
	return nil
}

// Equal reports whether a and b describe the same packet cache, bytes
// included.
func (kv *KV) Equal(b *KV) bool {
	same := func(x, y [][]byte) bool { return slices.EqualFunc(x, y, bytes.Equal) }
	return kv.Model == b.Model && kv.Namespace == b.Namespace && kv.AdapterID == b.AdapterID &&
		kv.HeaderTokens == b.HeaderTokens && kv.TrailerTokens == b.TrailerTokens &&
		slices.Equal(kv.TokenIDs, b.TokenIDs) && kv.BasePosition == b.BasePosition &&
		kv.KeyPosition == b.KeyPosition && same(kv.K, b.K) && same(kv.V, b.V)
}
