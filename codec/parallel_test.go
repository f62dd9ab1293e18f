package codec

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// packetJobs returns the 2*layers chunks of a small packet, layer-major, K
// before V, each under the given codec.
func packetJobs(layers int, c format.Codec, dt format.DType) []Job {
	var jobs []Job
	for i := range 2 * layers {
		k := format.ChunkK
		if i%2 == 1 {
			k = format.ChunkV
		}
		d := desc(k, dt, [3]int{2, 37, 16})
		jobs = append(jobs, Job{Codec: c, Desc: d, Src: kvData(d, uint64(i))})
	}
	return jobs
}

// TestParallelMatchesSequential encodes and decodes a packet's chunks in
// parallel and compares with one-at-a-time Encode and Decode.
func TestParallelMatchesSequential(t *testing.T) {
	for _, c := range allCodecs {
		for _, workers := range []int{0, 1, 3, 64} {
			jobs := packetJobs(5, c, format.DTypeBF16)
			if err := EncodeParallel(jobs, Options{}, workers); err != nil {
				t.Fatalf("%v workers %d: EncodeParallel: %v", c, workers, err)
			}
			dec := make([]Job, len(jobs))
			for i, j := range jobs {
				want := mustEncode(t, j.Src, c, j.Desc, Options{})
				if !bytes.Equal(j.Dst, want) {
					t.Fatalf("%v chunk %d: parallel encoding differs", c, i)
				}
				dec[i] = Job{Codec: c, Desc: j.Desc, Src: j.Dst, Dst: make([]byte, j.Desc.RawSize())}
			}
			if err := DecodeParallel(dec, workers); err != nil {
				t.Fatalf("%v workers %d: DecodeParallel: %v", c, workers, err)
			}
			for i, j := range dec {
				if want := mustDecode(t, j.Src, c, j.Desc); !bytes.Equal(j.Dst, want) {
					t.Fatalf("%v chunk %d: parallel decoding differs", c, i)
				}
			}
		}
	}
}

// TestParallelError reports the lowest failing chunk by number.
func TestParallelError(t *testing.T) {
	jobs := packetJobs(4, format.CodecShuffleZstd, format.DTypeF16)
	if err := EncodeParallel(jobs, Options{}, 2); err != nil {
		t.Fatal(err)
	}
	dec := make([]Job, len(jobs))
	for i, j := range jobs {
		dec[i] = Job{Codec: j.Codec, Desc: j.Desc, Src: j.Dst, Dst: make([]byte, j.Desc.RawSize())}
	}
	dec[5].Src = dec[5].Src[:10]
	dec[6].Src = nil
	err := DecodeParallel(dec, 1)
	if !errors.Is(err, format.ErrCorruption) || !strings.HasPrefix(err.Error(), "chunk 5:") {
		t.Fatalf("DecodeParallel = %v, want chunk 5's corruption", err)
	}
	if err := DecodeParallel(nil, 4); err != nil {
		t.Fatalf("no jobs: %v", err)
	}
}
