package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"runtime"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/artifact"
)

// The store's own catalog records are decoded by unexported functions, so
// their fuzz targets live here rather than in fuzz/. Seeds replay in a
// plain `go test ./store`; to fuzz one:
//
//	go test ./store -run '^$' -fuzz '^FuzzDecodeBlobRecord$' -fuzztime 30s

// artifactSeeds are good artifact bodies and broken ones.
func artifactSeeds() [][]byte {
	fp := format.Fingerprint{1, 2, 3}
	good := artifact.Encode(fp, "router-w", make([]byte, 24), &ArtifactMeta{DType: format.DTypeF32, Shape: []int{2, 3}, Note: "run 7"}, 5)
	opaque := artifact.Encode(fp, "tau", []byte{1, 2, 3}, &ArtifactMeta{}, 6)
	huge := bytes.Clone(good)
	binary.LittleEndian.PutUint64(huge[40:], 1<<40) // claims 2^40 bytes of data
	rank := bytes.Clone(good)
	rank[53] = 255
	return [][]byte{good, opaque, huge, rank, good[:30], good[:len(good)-1]}
}

// FuzzDecodeBlobRecord feeds whole blob file record values.
func FuzzDecodeBlobRecord(f *testing.F) {
	good := encodeBlobRecord(&blobRecord{Num: 3, Size: 3 * format.Alignment, LiveBytes: format.Alignment,
		DeadBytes: format.Alignment, Extents: 2, LiveExtents: 1, Sealed: true})
	f.Add(good)
	f.Add(good[:20])
	f.Add(encodeSequence(7))
	bad := bytes.Clone(good)
	bad[format.FrameSize+16] ^= 1
	f.Add(bad)
	f.Fuzz(func(t *testing.T, v []byte) {
		r, err := decodeBlobRecord(3, v)
		if err != nil {
			if !errors.Is(err, ErrCorruption) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		r2, err := decodeBlobRecord(3, encodeBlobRecord(&r))
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("record %+v re-encodes to %+v, %v", r, r2, err)
		}
	})
}

// TestArtifactHugeClaims: artifact records of at most 4 KiB claiming
// 2^40 bytes of data, or a huge rank or dimension at any position, fail
// with ErrCorruption having allocated little.
func TestArtifactHugeClaims(t *testing.T) {
	good := artifactSeeds()[0]
	n := 0
	for pos := 32; pos+8 <= len(good); pos += 4 {
		for _, v := range []uint64{1 << 40, 1<<32 - 1} {
			b := bytes.Clone(good)
			binary.LittleEndian.PutUint64(b[pos:], v)
			var err error
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err = artifact.Decode(b)
			runtime.ReadMemStats(&after)
			a := after.TotalAlloc - before.TotalAlloc
			if err == nil {
				continue // a field that may hold anything (the data)
			}
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("position %d = %d: %v", pos, v, err)
			}
			if a > 64<<10 {
				t.Fatalf("position %d = %d: %d bytes allocated", pos, v, a)
			}
			n++
		}
	}
	if n < 8 {
		t.Fatalf("only %d hostile claims were refused", n)
	}
	t.Logf("%d hostile claims in a %d-byte artifact refused with ErrCorruption", n, len(good))
}
