package fuzz

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/fb"
)

// TestWriteSeedCorpus rewrites testdata/fuzz/*/seed-* from the seeds above
// (after a format change); it only runs when asked. Inputs the fuzzer found
// are kept in files of their own and never rewritten.
func TestWriteSeedCorpus(t *testing.T) {
	if os.Getenv("KVSTORE_WRITE_CORPUS") == "" {
		t.Skip("set KVSTORE_WRITE_CORPUS=1 to rewrite the seed corpus")
	}
	headers, specs := headerSeeds(t), specSeeds(t)
	var headerBodies, specBodies [][]byte
	for _, b := range headers[:3] {
		headerBodies = append(headerBodies, b[format.FrameSize:])
	}
	headerBodies = append(headerBodies, sharedChunksBody())
	for _, b := range specs[:5] {
		specBodies = append(specBodies, b[format.FrameSize:])
	}
	tr := format.Trailer{Packet: format.PacketID{5}, Offset: format.Alignment, PayloadLen: 640, PayloadCRC: 1}
	trailer := tr.Encode()
	formatFile := format.EncodeFormatFile(format.Current)
	blob := format.EncodeBlobHeader(3)
	for _, tc := range []struct {
		name   string
		inputs [][]byte
	}{
		{"FuzzDecodeHeader", headers},
		{"FuzzDecodeHeaderBody", headerBodies},
		{"FuzzDecodeModelSpec", specs},
		{"FuzzDecodeModelSpecBody", specBodies},
		{"FuzzDecodeFormatFile", [][]byte{formatFile, flip(formatFile, 9), formatFile[:19]}},
		{"FuzzDecodeTrailer", [][]byte{trailer, flip(trailer, 0), append(trailer, 0)}},
		{"FuzzDecodeBlobHeader", [][]byte{blob, blob[:20], flip(blob, 3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "fuzz", tc.name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for i, in := range tc.inputs {
				data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(in)) + ")\n"
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// sharedChunksBody is a well-formed header body whose 2048 chunk entries
// all point at one chunk table: a small input asking for a large decode.
func sharedChunksBody() []byte {
	b := flatbuffers.NewBuilder(0)
	fb.ChunkStart(b)
	fb.ChunkAddLayer(b, 0)
	chunk := fb.ChunkEnd(b)
	n := 2 * format.MaxLayers
	fb.PacketHeaderStartChunksVector(b, n)
	for range n {
		b.PrependUOffsetT(chunk)
	}
	chunks := b.EndVector(n)
	fb.PacketHeaderStart(b)
	fb.PacketHeaderAddVersion(b, format.FormatMajor)
	fb.PacketHeaderAddLayers(b, format.MaxLayers)
	fb.PacketHeaderAddChunks(b, chunks)
	b.Finish(fb.PacketHeaderEnd(b))
	return b.FinishedBytes()
}
