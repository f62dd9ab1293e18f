package format

import (
	"errors"
	"slices"
	"testing"
)

func TestKeepSetRoundTrip(t *testing.T) {
	s := &KeepSet{Layers: 2, KVHeads: 2, Tokens: 9, Keep: [][]int32{{0}, {1, 8}, {}, {2, 3, 4}}}
	b := AppendKeepSet(nil, s)
	if len(b) != KeepSetSize(s) || string(b[:4]) != "KVKS" {
		t.Fatalf("%d bytes (want %d), magic %q", len(b), KeepSetSize(s), b[:4])
	}
	got, err := DecodeKeepSet(b)
	if err != nil || got.Layers != 2 || got.KVHeads != 2 || got.Tokens != 9 || !slices.EqualFunc(got.Keep, s.Keep, slices.Equal) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
}

func TestKeepSetRefusals(t *testing.T) {
	good := AppendKeepSet(nil, &KeepSet{Layers: 1, KVHeads: 2, Tokens: 4, Keep: [][]int32{{0, 1}, {3}}})
	reCRC := func(b []byte) []byte {
		b = b[:len(b)-4]
		return append(b, byte(CRC(b)), byte(CRC(b)>>8), byte(CRC(b)>>16), byte(CRC(b)>>24))
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"short", good[:19]},
		{"magic", append([]byte("KVKX"), good[4:]...)},
		{"crc", append(slices.Clone(good[:len(good)-1]), good[len(good)-1]^1)},
		{"no layers", reCRC(append(append(slices.Clone(good[:4]), 0, 0, 0, 0), good[8:]...))},
		{"overrun", reCRC(func() []byte { b := slices.Clone(good); b[16] = 200; return b }())},
		{"trailing", reCRC(append(slices.Clone(good[:len(good)-4]), 0, 0, 0, 0, 0, 0, 0, 0))},
		{"no tokens", reCRC(func() []byte { b := slices.Clone(good); b[12] = 0; return b }())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeKeepSet(tc.b); !errors.Is(err, ErrCorruption) {
				t.Errorf("%s: %v, want ErrCorruption", tc.name, err)
			}
		})
	}
}
