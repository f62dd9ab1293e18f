package format

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/kvstore/kvstore/format/fb"
)

// mutate returns a damaged copy of body: bit flips, byte sets, truncation,
// splices from other (or its own) bodies, insertions or deletions.
func mutate(r *rand.Rand, body []byte, donors [][]byte) []byte {
	b := bytes.Clone(body)
	interesting := []byte{0, 1, 0x7f, 0x80, 0xfe, 0xff}
	for n := 1 + r.IntN(3); n > 0 && len(b) > 0; n-- {
		switch r.IntN(7) {
		case 0, 1: // bit flip
			b[r.IntN(len(b))] ^= 1 << r.IntN(8)
		case 2: // byte set
			b[r.IntN(len(b))] = interesting[r.IntN(len(interesting))]
		case 3: // random 4-byte word, often an offset or a length
			i := r.IntN(len(b)) &^ 3
			for j := i; j < min(i+4, len(b)); j++ {
				b[j] = byte(r.Uint32())
			}
		case 4: // truncation
			b = b[:r.IntN(len(b))]
		case 5: // splice a run from a donor over b
			d := donors[r.IntN(len(donors))]
			if len(d) == 0 {
				continue
			}
			src, n := r.IntN(len(d)), 1+r.IntN(32)
			copy(b[r.IntN(len(b)):], d[src:min(src+n, len(d))])
		case 6: // insert or delete a few bytes
			i, n := r.IntN(len(b)), 1+r.IntN(8)
			if r.IntN(2) == 0 {
				b = append(b[:i], append(make([]byte, n), b[i:]...)...)
			} else {
				b = append(b[:i], b[min(i+n, len(b)):]...)
			}
		}
	}
	return b
}

// campaignStats counts what the decoders made of the mutated bodies.
type campaignStats struct {
	total, corruption, version, ok int
	panics                         int // with the verifier: must stay 0
	unverifiedPanics               int // the same bodies read without it
}

func (s campaignStats) String() string {
	return fmt.Sprintf("%d mutations: %d ErrCorruption, %d ErrVersion, %d decoded valid, %d panics; "+
		"without the verifier %d panicked (%.1f%%)", s.total, s.corruption, s.version, s.ok, s.panics,
		s.unverifiedPanics, 100*float64(s.unverifiedPanics)/float64(s.total))
}

// campaignSize is 20,000 mutations, 100,000 with KVSTORE_LONG=1, or
// KVSTORE_MUTATIONS.
func campaignSize() int {
	if n, err := strconv.Atoi(os.Getenv("KVSTORE_MUTATIONS")); err == nil && n > 0 {
		return n
	}
	if os.Getenv("KVSTORE_LONG") != "" {
		return 100_000
	}
	if testing.Short() {
		return 2_000
	}
	return 20_000
}

// campaignRand is seeded from KVSTORE_SEED when set, so that long runs can
// try other mutations; the default keeps the unit test reproducible.
func campaignRand(def uint64) *rand.Rand {
	if s, err := strconv.ParseUint(os.Getenv("KVSTORE_SEED"), 10, 64); err == nil {
		def = s
	}
	return rand.New(rand.NewPCG(def, def+1))
}

// panics runs f and reports whether it panicked.
func panics(f func()) (panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	f()
	return false
}

// TestHeaderMutationCampaign damages good header bodies, seals them again
// with a correct CRC so that only the verifier and Validate stand between
// the bytes and the accessors, and decodes them with decodeHeaderBody, which
// has no recover. Every result must be an error or a valid header that
// re-encodes to bytes decoding to the same value.
func TestHeaderMutationCampaign(t *testing.T) {
	var bodies [][]byte
	for _, s := range []headerShape{
		smallShape,
		{layers: 1, kvHeads: 1, headDim: 2, dtype: DTypeF32, doc: 1},
		{layers: 3, kvHeads: 3, headDim: 7, dtype: DTypeF16, hdr: 2, doc: 9, trl: 1, codec: CodecShuffleZstd, ns: "tenant", adapter: "ad"},
		{layers: 1, kvHeads: 2, headDim: 4, dtype: DTypeBF16, hdr: 4, trl: 4},
		prunedShape,
		{layers: 3, kvHeads: 1, headDim: 4, dtype: DTypeF16, doc: 12, kept: 5, codec: CodecShuffleZstd},
	} {
		bodies = append(bodies, buildHeader(testHeader(s)))
	}
	r := campaignRand(1)
	var st campaignStats
	for st.total = 0; st.total < campaignSize(); st.total++ {
		body := mutate(r, bodies[r.IntN(len(bodies))], bodies)
		var h *PacketHeader
		var err error
		if panics(func() { h, err = decodeHeaderBody(body) }) {
			st.panics++
			t.Errorf("decodeHeaderBody panicked on %x", body)
			continue
		}
		if panics(func() { touchHeader(fb.GetRootAsPacketHeader(body, 0)) }) {
			st.unverifiedPanics++
		}
		switch {
		case errors.Is(err, ErrCorruption):
			st.corruption++
		case errors.Is(err, ErrVersion):
			st.version++
		case err != nil:
			t.Fatalf("error wraps neither ErrCorruption nor ErrVersion: %v", err)
		default:
			st.ok++
			checkReencode(t, h)
		}
	}
	t.Log(st)
	if st.unverifiedPanics == 0 {
		t.Error("no mutation made the unverified accessors panic: the campaign is too gentle to prove anything")
	}
}

// touchHeader calls every accessor of an unverified header, as readHeader
// would, without allocating what a corrupt length asks for.
func touchHeader(t *fb.PacketHeader) {
	var s fb.Hash256
	var c fb.Chunk
	_ = t.Version() + uint16(len(t.Namespace())) + uint16(len(t.AdapterId())) + uint16(t.Dtype())
	_ = t.HeaderTokens() + t.TrailerTokens() + t.Tokens() + t.Layers() + t.KvHeads() + t.HeadDim() + t.BlobFile()
	_ = t.BasePosition() + t.CreatedUnixNs() + int64(t.ExtentOffset()+t.ExtentLength()) + int64(t.KeptTokens())
	if t.Id(&s) != nil && t.Model(&s) != nil {
		_ = readHash(&s)
	}
	for i := range min(t.TokenIdsLength(), 4096) {
		_ = t.TokenIds(i)
	}
	for i := range min(t.ChunksLength(), 4096) {
		t.Chunks(&c, i)
		for j := range min(c.ShapeLength(), 4096) {
			_ = c.Shape(j)
		}
		_ = c.Layer() + uint32(c.Kind()) + uint32(c.Dtype()) + uint32(c.Codec()) + c.BlobFile() + c.Crc32c()
		_ = c.Offset() + c.Length() + c.RawLength()
	}
}

// checkReencode requires a decoded header to encode and decode to itself.
func checkReencode(t *testing.T, h *PacketHeader) {
	t.Helper()
	b, err := EncodeHeader(h)
	if err != nil {
		t.Fatalf("decoded header does not re-encode: %v", err)
	}
	h2, err := DecodeHeader(b)
	if err != nil || !reflect.DeepEqual(h, h2) {
		t.Fatalf("re-encoded header decodes to %+v, %v; want %+v", h2, err, h)
	}
}

// TestModelSpecMutationCampaign is the same campaign for model specs.
func TestModelSpecMutationCampaign(t *testing.T) {
	var bodies [][]byte
	specs := testSpecs()
	for _, name := range slices.Sorted(maps.Keys(specs)) { // reproducible order
		bodies = append(bodies, buildModelSpec(specs[name]))
	}
	r := campaignRand(3)
	var st campaignStats
	for st.total = 0; st.total < campaignSize()/4; st.total++ {
		body := mutate(r, bodies[r.IntN(len(bodies))], bodies)
		var m *ModelSpec
		var err error
		if panics(func() { m, err = decodeModelSpecBody(body) }) {
			st.panics++
			t.Errorf("decodeModelSpecBody panicked on %x", body)
			continue
		}
		if panics(func() { touchModelSpec(fb.GetRootAsModelSpec(body, 0)) }) {
			st.unverifiedPanics++
		}
		switch {
		case errors.Is(err, ErrCorruption):
			st.corruption++
		case err != nil:
			t.Fatalf("error does not wrap ErrCorruption: %v", err)
		default:
			st.ok++
			b, err := EncodeModelSpec(m)
			if err != nil {
				t.Fatalf("decoded spec does not re-encode: %v", err)
			}
			if m2, err := DecodeModelSpec(b); err != nil || !reflect.DeepEqual(m, m2) || m.Fingerprint() != m2.Fingerprint() {
				t.Fatalf("re-encoded spec decodes to %+v, %v; want %+v", m2, err, m)
			}
		}
	}
	t.Log(st)
	if st.unverifiedPanics == 0 {
		t.Error("no mutation made the unverified accessors panic: the campaign is too gentle to prove anything")
	}
}

// touchModelSpec calls every accessor of an unverified model spec.
func touchModelSpec(t *fb.ModelSpec) {
	var r fb.Rope
	_ = len(t.Architecture()) + len(t.WeightsId()) + int(t.Layers()+t.KvHeads()+t.HeadDim()) + int(t.Dtype())
	if t.Rope(&r) != nil {
		_ = r.Theta() + r.Factor() + r.LowFreqFactor() + r.HighFreqFactor() + r.BetaFast() + r.BetaSlow() + r.AttentionFactor()
		_ = int64(r.Style()) + int64(r.Scaling()) + int64(r.RotaryDims()) + r.OriginalMaxPos()
	}
}
