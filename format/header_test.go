package format

import "testing"

// TestHeaderMoved: every chunk keeps its place within the extent, the
// extent moves, and the original is not changed.
func TestHeaderMoved(t *testing.T) {
	h := &PacketHeader{BlobFile: 3, ExtentOffset: 8192, Chunks: []ChunkDesc{
		{BlobFile: 3, Offset: 8192 + 64}, {BlobFile: 3, Offset: 8192 + 4160}}}
	m := h.Moved(9, 4096)
	if m.BlobFile != 9 || m.ExtentOffset != 4096 {
		t.Fatalf("moved extent at %d:%d, want 9:4096", m.BlobFile, m.ExtentOffset)
	}
	for i, want := range []uint64{4096 + 64, 4096 + 4160} {
		if c := m.Chunks[i]; c.BlobFile != 9 || c.Offset != want {
			t.Fatalf("chunk %d at %d:%d, want 9:%d", i, c.BlobFile, c.Offset, want)
		}
	}
	if h.BlobFile != 3 || h.ExtentOffset != 8192 || h.Chunks[0].BlobFile != 3 || h.Chunks[1].Offset != 8192+4160 {
		t.Fatal("Moved changed the original header")
	}
}
