package format

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRC checks CRC and CRCUpdate against hash/crc32 with the Castagnoli
// table, the checksum every CRC field on disk was written with, on short
// and chunk-sized inputs.
func TestCRC(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 3<<20)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for _, n := range []int{0, 1, 9, 64, 255, 256, 4096, 12345, 1 << 20, 2<<20 + 3, len(b)} {
		if got, w := CRC(b[:n]), crc32.Checksum(b[:n], tab); got != w {
			t.Fatalf("CRC(len %d) = %#08x, want %#08x", n, got, w)
		}
		h := n / 3
		if got, w := CRCUpdate(CRC(b[:h]), b[h:n]), crc32.Checksum(b[:n], tab); got != w {
			t.Fatalf("CRCUpdate(len %d split %d) = %#08x, want %#08x", n, h, got, w)
		}
	}
	if got := CRC([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("CRC(123456789) = %#08x, want 0xe3069283", got)
	}
}
