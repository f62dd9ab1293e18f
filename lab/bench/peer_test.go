package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestPeersRoundTrip puts two packets in every store, reopens it, and reads
// both back byte for byte.
func TestPeersRoundTrip(t *testing.T) {
	a, b := NewPacket(tiny, 6, 1), NewPacket(tiny, 6, 2)
	for _, name := range StoreNames() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := opener(name)(dir, tiny, 6)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Put(7, a); err != nil {
				t.Fatal(err)
			}
			if err := p.Put(8, b); err != nil {
				t.Fatal(err)
			}
			if err := p.Settle(); err != nil {
				t.Fatal(err)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if p, err = opener(name)(dir, tiny, 6); err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for _, tc := range []struct {
				id   uint64
				want *Packet
			}{{7, a}, {8, b}} {
				t.Run(fmt.Sprint("packet ", tc.id), func(t *testing.T) {
					var got []byte
					err := p.Get(tc.id, func(l int, k, v []byte) error {
						if l != len(got)/(2*tiny.ChunkBytes(6)) {
							t.Fatalf("layer %d visited out of order", l)
						}
						got = append(append(got, k...), v...)
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, tc.want.Data) {
						t.Fatalf("packet %d read back differs", tc.id)
					}
				})
			}
			if err := p.Get(9, discard); err == nil {
				t.Fatal("Get of a packet never put succeeded")
			}
		})
	}
}

func TestVisitError(t *testing.T) {
	p := NewPacket(tiny, 2, 1)
	stop := errors.New("stop")
	n := 0
	err := visitBuffer(p.Data, tiny, 2, func(int, []byte, []byte) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("visit error not returned at once: %v after %d layers", err, n)
	}
	if err := visitBuffer(p.Data[1:], tiny, 2, discard); !errors.Is(err, errShortRead) {
		t.Fatalf("short buffer: %v, want errShortRead", err)
	}
}

func TestChunkKey(t *testing.T) {
	seen := map[string]bool{}
	for id := range uint64(50) {
		for c := range 6 {
			k := chunkKey(id, c)
			if seen[string(k)] {
				t.Fatalf("key of packet %d chunk %d repeats", id, c)
			}
			seen[string(k)] = true
			if got := binary.BigEndian.Uint16(k[8:]); int(got) != c/2 || int(k[10]) != c%2 {
				t.Fatalf("chunk %d encoded as layer %d kind %d", c, got, k[10])
			}
		}
	}
	// Ascending ids must not give ascending keys: the key space is scattered.
	ascending := 0
	for id := range uint64(50) {
		if bytes.Compare(chunkKey(id, 0), chunkKey(id+1, 0)) < 0 {
			ascending++
		}
	}
	if ascending == 49 {
		t.Fatal("keys of successive ids are in ascending order")
	}
}

func TestTouch(t *testing.T) {
	b := make([]byte, 100)
	base := touch(b)
	for _, i := range []int{0, 31, 32, 95, 96, 99} {
		b[i] = 1
		if touch(b) == base {
			t.Fatalf("touch does not read byte %d", i)
		}
		b[i] = 0
	}
}

// TestKVStoreAssemble checks what the kvstore peer's Assemble hands back:
// the packets' values side by side per head, and the first packet's keys
// unchanged (it sits at position 0, where keys are stored).
func TestKVStoreAssemble(t *testing.T) {
	pk := NewPacket(tiny, 4, 1)
	p, err := openKVStore(t.TempDir(), tiny, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for id := range uint64(3) {
		if err := p.Put(id, pk); err != nil {
			t.Fatal(err)
		}
	}
	a := p.(Assembler)
	row := tiny.HeadDim * 2
	err = a.Assemble([]uint64{0, 1, 2}, func(l int, k, v []byte) error {
		wk, wv := pk.Layer(l)
		for h := range tiny.KVHeads {
			src := wv[h*4*row : (h+1)*4*row]
			for i := range 3 {
				at := (h*12 + i*4) * row
				if !bytes.Equal(v[at:at+4*row], src) {
					t.Fatalf("layer %d head %d packet %d: values moved or changed", l, h, i)
				}
			}
			if !bytes.Equal(k[h*12*row:h*12*row+4*row], wk[h*4*row:(h+1)*4*row]) {
				t.Fatalf("layer %d head %d: keys at position 0 changed", l, h)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.AssembleLabel(), "store.Assemble") {
		t.Fatalf("label %q", a.AssembleLabel())
	}
}
