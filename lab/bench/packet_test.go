package bench

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// tiny is a shape small enough for unit tests under -race.
var tiny = Shape{Name: "tiny", Layers: 3, KVHeads: 2, HeadDim: 16, Params: 1e6, QHeads: 4,
	RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}}

func TestPacketLayout(t *testing.T) {
	p := NewPacket(tiny, 5, 1)
	if got, want := int64(len(p.Data)), tiny.PacketBytes(5); got != want {
		t.Fatalf("packet bytes %d, want %d", got, want)
	}
	if got, want := tiny.PacketBytes(5), int64(3*2*2*5*16*2); got != want {
		t.Fatalf("PacketBytes = %d, want %d", got, want)
	}
	k, v := p.Layer(2)
	if len(k) != tiny.ChunkBytes(5) || &k[0] != &p.Data[4*len(k)] || &v[0] != &p.Data[5*len(k)] {
		t.Fatalf("layer 2 is not chunks 4 and 5")
	}
}

func TestPacketDeterministic(t *testing.T) {
	a, b := NewPacket(tiny, 7, 42), NewPacket(tiny, 7, 42)
	if !bytes.Equal(a.Data, b.Data) {
		t.Fatal("same seed gave different bytes")
	}
	if c := NewPacket(tiny, 7, 43); bytes.Equal(a.Data, c.Data) {
		t.Fatal("different seeds gave the same bytes")
	}
}

// TestPacketKVLike checks the data is finite bf16 with channel scales that
// differ, which is what makes it compress like a real cache and not like noise.
func TestPacketKVLike(t *testing.T) {
	s := Shape{Name: "one-head", Layers: 1, KVHeads: 1, HeadDim: 128}
	p := NewPacket(s, 512, 3)
	v := p.Chunk(1) // values: zero mean, per-channel scale
	minSD, maxSD := math.Inf(1), 0.0
	for c := range 128 {
		var sum, sq float64
		for tok := range 512 {
			x := float64(format.BF16ToF32(binary.LittleEndian.Uint16(v[2*(tok*128+c):])))
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("non-finite value at token %d channel %d", tok, c)
			}
			sum += x
			sq += x * x
		}
		sd := math.Sqrt(sq/512 - (sum/512)*(sum/512))
		minSD, maxSD = min(minSD, sd), max(maxSD, sd)
	}
	if maxSD/minSD < 2 {
		t.Fatalf("channel scales span only %.2fx; want per-channel variation", maxSD/minSD)
	}
}

func TestTokenIDs(t *testing.T) {
	if bytes.Equal(u32bytes(TokenIDs(1, 8)), u32bytes(TokenIDs(2, 8))) {
		t.Fatal("ids 1 and 2 share token ids")
	}
	if !bytes.Equal(u32bytes(TokenIDs(5, 8)), u32bytes(TokenIDs(5, 8))) {
		t.Fatal("token ids not deterministic")
	}
}

func u32bytes(xs []uint32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func TestParseShapes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"all", []string{"llama8b", "qwen3b"}, false},
		{"qwen3b", []string{"qwen3b"}, false},
		{"llama8b, qwen3b", []string{"llama8b", "qwen3b"}, false},
		{"gpt2", nil, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseShapes(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("ParseShapes(%q) error %v, want error %v", tc.in, err, tc.err)
			}
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("ParseShapes(%q) = %v, want %v", tc.in, names, tc.want)
			}
		})
	}
	if got := Llama8B.BytesPerToken(); got != 131072 {
		t.Fatalf("llama8b bytes per token %d, want 131072 (DESIGN.md)", got)
	}
	if got := Qwen3B.BytesPerToken(); got != 36864 {
		t.Fatalf("qwen3b bytes per token %d, want 36864 (DESIGN.md)", got)
	}
}
