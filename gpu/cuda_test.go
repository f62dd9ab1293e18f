package gpu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"testing"
	"unsafe"

	"github.com/kvstore/kvstore/gpu/kernels"
	"github.com/kvstore/kvstore/internal/testenv"
)

// GPU tests run when gpu.Open finds a device, and skip through testenv
// otherwise. KVSTORE_REQUIRE=gpu, or KVSTORE_GPU=1 (the device check script
// sets both), makes a missing device a failure instead.
func openCUDA(t testing.TB) Device {
	t.Helper()
	dev, err := Open()
	if err != nil {
		if !errors.Is(err, ErrNoDevice) {
			t.Fatalf("Open failed without wrapping ErrNoDevice: %v", err)
		}
		needGPU(t, err)
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Error(err)
		}
	})
	return dev
}

// needGPU skips t, or fails it when a GPU is required, because Open failed
// with err.
func needGPU(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("KVSTORE_GPU") == "1" {
		t.Fatalf("KVSTORE_GPU=1 but no device: %v", err)
	}
	testenv.Need(t, testenv.GPU, false, fmt.Sprintf("no CUDA device (KVSTORE_GPU=1 also requires one): %v", err))
}

// TestOpenWithoutLibrary: a missing driver library is ErrNoDevice, never a
// panic or an exit, on every machine.
func TestOpenWithoutLibrary(t *testing.T) {
	dev, err := OpenCUDA(CUDAOptions{Library: "libkvstore-no-such-cuda.so.1"})
	if dev != nil || !errors.Is(err, ErrNoDevice) {
		t.Fatalf("OpenCUDA with a missing library = %v, %v; want ErrNoDevice", dev, err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("libkvstore-no-such-cuda.so.1")) {
		t.Fatalf("error does not name the library: %v", err)
	}
}

// TestOpen: Open either finds a device or says why not with ErrNoDevice.
func TestOpen(t *testing.T) {
	dev, err := Open()
	if err != nil {
		if !errors.Is(err, ErrNoDevice) {
			t.Fatalf("Open: %v does not wrap ErrNoDevice", err)
		}
		if os.Getenv("KVSTORE_GPU") == "1" || testenv.Required(testenv.GPU) {
			t.Fatalf("a GPU is required (KVSTORE_GPU=1 or KVSTORE_REQUIRE=gpu) but Open failed: %v", err)
		}
		t.Logf("no GPU, as a CPU node should report it: %v", err)
		return
	}
	defer dev.Close()
	info := dev.Info()
	t.Logf("device: %+v", info)
	if info.Kind != KindCUDA || info.ComputeCapability < 80 || info.MemoryBytes <= 0 || info.Multiprocessors <= 0 {
		t.Fatalf("implausible device info %+v", info)
	}
}

func TestCUDAErrorText(t *testing.T) {
	err := error(&CUDAError{Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Text: "out of memory"})
	if !errors.Is(err, ErrCUDA) {
		t.Fatal("CUDAError does not wrap ErrCUDA")
	}
	want := "kvstore/gpu: cuMemAlloc_v2: CUDA error 2 CUDA_ERROR_OUT_OF_MEMORY: out of memory"
	if err.Error() != want {
		t.Fatalf("Error() = %q, want %q", err.Error(), want)
	}
}

var paramRE = regexp.MustCompile(`\.param \.align \d+ \.b8 (\w+)_param_0\[(\d+)\]`)

// TestParamLayout: the Go parameter blocks have the sizes the PTX declares
// for the kernels' by-value struct parameter, and the field offsets the C
// structs have.
func TestParamLayout(t *testing.T) {
	want := map[string]uintptr{
		"kvs_reconstruct": unsafe.Sizeof(cuReconParams{}),
		"kvs_shift":       unsafe.Sizeof(cuShiftParams{}),
	}
	for _, m := range kernels.Modules {
		for _, arch := range kernels.Archs {
			ptx, err := kernels.PTX(m, arch)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			sc := bufio.NewScanner(bytes.NewReader(ptx))
			for sc.Scan() {
				if g := paramRE.FindStringSubmatch(sc.Text()); g != nil && g[1] == m.Entry {
					n, _ := strconv.Atoi(g[2])
					if uintptr(n) != want[m.Entry] {
						t.Errorf("%s: PTX parameter is %d bytes, Go struct %d", kernels.PTXName(m, arch), n, want[m.Entry])
					}
					found = true
				}
			}
			if !found {
				t.Errorf("%s: no by-value struct parameter for %s", kernels.PTXName(m, arch), m.Entry)
			}
		}
	}
	var r cuReconParams
	var s cuShiftParams
	for _, tc := range []struct {
		name string
		c    [2]uintptr
	}{
		{"Layout.Kind", [2]uintptr{unsafe.Offsetof(r.Out.Kind), 16}},
		{"Layout.Tokens", [2]uintptr{unsafe.Offsetof(r.Out.Tokens), 32}},
		{"ReconParams.Factors", [2]uintptr{unsafe.Offsetof(r.Factors), 48}},
		{"ReconParams.Jobs", [2]uintptr{unsafe.Offsetof(r.Jobs), 80}},
		{"ReconParams.NumJobs", [2]uintptr{unsafe.Offsetof(r.NumJobs), 88}},
		{"ReconParams.MaxRank", [2]uintptr{unsafe.Offsetof(r.MaxRank), 104}},
		{"ReconParams.RowsPerBlock", [2]uintptr{unsafe.Offsetof(r.RowsPerBlock), 108}},
		{"ShiftParams.Src", [2]uintptr{unsafe.Offsetof(s.Src), 48}},
		{"ShiftParams.SrcDType", [2]uintptr{unsafe.Offsetof(s.SrcDType), 64}},
		{"ShiftParams.Style", [2]uintptr{unsafe.Offsetof(s.Style), 80}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.c[0] != tc.c[1] {
				t.Errorf("%s at offset %d, C struct has it at %d", tc.name, tc.c[0], tc.c[1])
			}
		})
	}
}

func TestRowsPerBlock(t *testing.T) {
	for _, c := range []struct{ hd, rank, rows, want int }{
		{128, 32, 128, 8}, {8, 4, 9, 9}, {8, 4, 1000, 128}, {4096, 4096, 10, 1}, {1024, 4096, 10, 1}, {64, 1024, 100, 8},
	} {
		got := rowsPerBlock(c.hd, c.rank, c.rows)
		if got != c.want || 4*got*(c.rank+c.hd) > maxShared && got > 1 {
			t.Errorf("rowsPerBlock(%d, %d, %d) = %d, want %d", c.hd, c.rank, c.rows, got, c.want)
		}
	}
}

func TestCUDAReconstructMatchesReference(t *testing.T) {
	dev := openCUDA(t)
	for i, c := range reconCases() {
		t.Run(c.String(), func(t *testing.T) { checkReconstruct(t, dev, c, uint64(i)) })
	}
}

func TestCUDAShiftMatchesReference(t *testing.T) {
	dev := openCUDA(t)
	for i, c := range shiftCases() {
		t.Run(c.String(), func(t *testing.T) { checkShift(t, dev, c, uint64(i)) })
	}
}

func TestCUDAPipelineMatchesReference(t *testing.T) {
	dev := openCUDA(t)
	for i, c := range pipelineCases() {
		t.Run(fmt.Sprintf("%v/%v->%v", c.kind, c.factorDT, c.outDT), func(t *testing.T) {
			sc := buildScene(t, c, uint64(i))
			got, st := runPipeline(t, dev, c, sc)
			for kv, name := range []string{"K", "V"} {
				if !bytes.Equal(got[kv], sc.want[kv]) {
					t.Fatalf("%s: %s", name, firstDiff(&sc.kLay, got[kv], sc.want[kv]))
				}
			}
			t.Logf("stats %+v", st)
		})
	}
}

// TestCUDAMemory: copies through pinned and pageable memory, device to
// device and memset round-trip; a huge allocation fails with ErrBudget.
func TestCUDAMemory(t *testing.T) { checkMemory(t, openCUDA(t)) }

func checkMemory(t *testing.T, dev Device) {
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 3<<20 + 5
	a, _ := dev.Alloc(n)
	b, _ := dev.Alloc(n)
	defer dev.Free(a)
	defer dev.Free(b)
	pinned, err := dev.AllocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.FreeHost(pinned)
	if !pinned.Pinned() {
		t.Fatal("AllocHost memory not pinned")
	}
	for i := range pinned.Bytes() {
		pinned.Bytes()[i] = byte(i * 7)
	}
	want := bytes.Clone(pinned.Bytes())
	s.CopyHtoD(a, pinned.Bytes())
	s.CopyDtoD(b, a)
	s.Memset(a, 0)
	back := make([]byte, n) // pageable
	s.CopyDtoH(back, b)
	zero := make([]byte, n)
	s.CopyDtoH(zero, a)
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, want) || bytes.ContainsFunc(zero, func(r rune) bool { return r != 0 }) {
		t.Fatal("round trip through device memory changed the bytes")
	}
	if _, err := dev.Alloc(math.MaxInt); !errors.Is(err, ErrBudget) && !errors.Is(err, ErrCUDA) {
		t.Fatalf("Alloc of MaxInt bytes: %v", err)
	}
}
