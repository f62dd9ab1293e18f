package adapter

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
)

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// sparseFile writes head at the start of a file of size bytes (the rest a
// hole) and returns its path.
func sparseFile(t *testing.T, head []byte, size int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "a.safetensors")
	if err := os.WriteFile(path, head, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	return path
}

// ReadFile reads what Encode writes, F32 and BF16.
func TestReadFileRoundTrip(t *testing.T) {
	a, err := Init(testModel(t), 3, 2, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, dt := range []safetensors.DType{safetensors.F32, safetensors.BF16} {
		b, err := a.Encode(dt)
		if err != nil {
			t.Fatal(err)
		}
		path := sparseFile(t, b, int64(len(b)))
		got, err := ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		if got.HeaderRows() != 3 || got.TrailerRows() != 2 || got.Dim != a.Dim || (dt == safetensors.F32 && got.ID() != a.ID()) {
			t.Fatalf("%s: read %d+%d rows of %d, id %s (wrote %s)", dt, got.HeaderRows(), got.TrailerRows(), got.Dim, got.ID(), a.ID())
		}
	}
}

// A file over the artifact limit is refused from its size: a sparse 1 GiB
// file (which the CLI once read and converted whole, 4.2 GiB) costs next to
// nothing. An adapter whose values would be over the limit as F32 is
// refused before they are converted; a directory and a corrupt file are
// refused with their sentinels.
func TestReadFileRefuses(t *testing.T) {
	// A BF16 header tensor of 17M values: 34 MB in the file, 68 MB as F32.
	rows := uint64(format.MaxArtifactSize/4/64 + 1)
	f := &safetensors.File{Tensors: []safetensors.Tensor{
		{Name: safetensors.NameHeader, DType: safetensors.BF16, Shape: []uint64{rows, 64}},
		{Name: safetensors.NameTrailer, DType: safetensors.BF16, Shape: []uint64{0, 64}, Data: []byte{}},
	}}
	f.Tensors[0].Data = make([]byte, 2*rows*64)
	hdr, err := f.Header()
	if err != nil {
		t.Fatal(err)
	}
	bf16Size := int64(len(hdr)) + int64(2*rows*64)
	for _, tc := range []struct {
		name     string
		path     string
		want     error
		maxAlloc uint64
	}{
		{"sparse 1 GiB", sparseFile(t, []byte("garbage"), 1<<30), ErrTooLarge, 1 << 20},
		{"one byte over", sparseFile(t, nil, format.MaxArtifactSize+1), ErrTooLarge, 1 << 20},
		{"bf16 over as f32", sparseFile(t, hdr, bf16Size), ErrTooLarge, uint64(bf16Size) + 1<<20},
		{"directory", t.TempDir(), format.ErrInvalidArgument, 1 << 20},
		{"corrupt", sparseFile(t, []byte("garbage"), 100), format.ErrCorruption, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if got := allocated(func() { _, err = ReadFile(tc.path) }); got > tc.maxAlloc {
				t.Errorf("allocated %d bytes, want at most %d", got, tc.maxAlloc)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("ReadFile: %v, want %v", err, tc.want)
			}
			if errors.Is(tc.want, ErrTooLarge) && !errors.Is(err, format.ErrInvalidArgument) {
				t.Fatalf("ReadFile: %v does not wrap ErrInvalidArgument", err)
			}
		})
	}
}
