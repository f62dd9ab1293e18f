package format

import "testing"

// TestPacketDescTokens: a packet's rows are its header rows, one per token
// id, then its trailer rows.
func TestPacketDescTokens(t *testing.T) {
	for _, c := range []struct {
		name string
		d    PacketDesc
		want int
	}{
		{"empty", PacketDesc{}, 0},
		{"document", PacketDesc{TokenIDs: []uint32{1, 2, 3}}, 3},
		{"adapter rows", PacketDesc{HeaderTokens: 2, TrailerTokens: 1, TokenIDs: []uint32{7}}, 4},
		{"adapter only", PacketDesc{HeaderTokens: 5}, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.d.Tokens(); got != c.want {
				t.Fatalf("Tokens() = %d, want %d", got, c.want)
			}
		})
	}
}
