package gpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"github.com/kvstore/kvstore/internal/testenv"
)

// The CUDA C kernels, compiled for the host by g++ (testdata/kernel-emu.cc
// includes kernels/*.cu under a small CUDA shim), run through the same
// reference tests as the Go kernels, with the parameter blocks Go builds
// for cuLaunchKernel byte for byte. This checks the .cu sources' layouts,
// indexing, conversions and order of float operations on machines without
// a GPU; warps, shared memory and the PTX JIT need the device check.

var emu struct {
	once sync.Once
	bin  string
	err  error
}

// hostBuilds are the temporary directories of what the tests built with
// g++; TestMain removes them.
var hostBuilds struct {
	mu   sync.Mutex
	dirs []string
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range hostBuilds.dirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// compileHost builds testdata/src with g++ into a new temporary directory
// and returns the path of out there. The kernels' directory and testdata
// are on the include path. The test reads the sources it names (g++ reads
// src from stdin) so that go test's cache sees them; the kernel sources are
// embedded in the binary already.
func compileHost(gxx, src, out string, flags ...string) (string, error) {
	code, err := os.ReadFile(filepath.Join("testdata", src))
	if err != nil {
		return "", err
	}
	if _, err := os.ReadFile("testdata/cuda-shim.h"); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "kvstore-gpu-host")
	if err != nil {
		return "", err
	}
	hostBuilds.mu.Lock()
	hostBuilds.dirs = append(hostBuilds.dirs, dir)
	hostBuilds.mu.Unlock()
	path := filepath.Join(dir, out)
	args := append([]string{"-std=c++14", "-O1", "-ffp-contract=off", "-Wall", "-Werror", "-Ikernels", "-Itestdata"}, flags...)
	cmd := exec.Command(gxx, append(args, "-o", path, "-x", "c++", "-")...)
	cmd.Stdin = bytes.NewReader(code)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("g++ %s: %v\n%s", src, err, out)
	}
	return path, nil
}

// emuDevice is a CPU device whose kernels are the compiled .cu sources.
func emuDevice(t *testing.T) Device {
	t.Helper()
	gxx := testenv.GxxPath(t)
	emu.once.Do(func() { emu.bin, emu.err = compileHost(gxx, "kernel-emu.cc", "kernel-emu") })
	if emu.err != nil {
		t.Fatal(emu.err)
	}
	return &cpuDevice{kernels: emuRunner{bin: emu.bin}}
}

type emuRunner struct{ bin string }

func (e emuRunner) reconstruct(l *ReconstructLaunch) error {
	if err := l.check(l.Dst.mem.owner); err != nil {
		return err
	}
	if l.NumJobs == 0 {
		return nil
	}
	p := reconParams(l)
	grid, _ := reconGrid(l, &p)
	return e.run(1, unsafe.Slice((*byte)(unsafe.Pointer(&p)), unsafe.Sizeof(p)), grid,
		whole(l.Dst), whole(l.Table), factorsRead(l), whole(l.Aux), whole(l.Jobs))
}

func (e emuRunner) shift(l *ShiftLaunch) error {
	n := int64(l.Layout.Heads) * int64(l.Tokens) * int64(l.Layout.HeadDim)
	if n == 0 {
		return nil
	}
	p := shiftParams(l)
	return e.run(2, unsafe.Slice((*byte)(unsafe.Pointer(&p)), unsafe.Sizeof(p)), shiftGrid(n, 4),
		whole(l.Dst), whole(l.Table), whole(l.Src), whole(l.CosSin))
}

// emuMem is an allocation as the harness sees it.
type emuMem struct {
	mem  *memory
	data []byte
}

func whole(b Buffer) emuMem {
	if b.mem == nil {
		return emuMem{}
	}
	return emuMem{b.mem, b.mem.host}
}

// factorsRead is the factor allocation with only the jobs' blocks filled
// in: what the kernel reads. The prefetcher's copy stream may be writing
// other blocks of the arena meanwhile (ordered by events, as on a GPU), so
// the rest must not be read here.
func factorsRead(l *ReconstructLaunch) emuMem {
	m := l.Factors.mem
	data := make([]byte, len(m.host))
	jobs := l.Jobs.bytes()
	for n := range l.NumJobs {
		j := decodeJob(jobs[n*JobSize:])
		if j.check(l) != nil {
			continue
		}
		size := factorHeader + int64(j.DType.Size())*(int64(j.Rows)*int64(j.Rank)+int64(j.Rank)+int64(j.Rank)*int64(l.Layout.HeadDim))
		at := int64(l.Factors.off) + j.Factors
		copy(data[at:at+size], m.host[at:at+size])
	}
	return emuMem{m, data}
}

// run sends the kernel, its parameters and the allocations its buffers
// live in to the harness, and copies back the first (the destination's).
func (e emuRunner) run(kernel uint32, params []byte, grid [3]uint32, mems ...emuMem) error {
	var in bytes.Buffer
	var sent []emuMem
	for _, m := range mems {
		if m.mem != nil && !containsMem(sent, m.mem) {
			sent = append(sent, m)
		}
	}
	le := binary.LittleEndian
	in.Write(le.AppendUint32(le.AppendUint32(nil, kernel), uint32(len(params))))
	in.Write(params)
	in.Write(le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, grid[0]), grid[1]), uint32(len(sent))))
	for _, m := range sent {
		in.Write(le.AppendUint64(le.AppendUint64(nil, m.mem.ptr), uint64(len(m.data))))
		in.Write(m.data)
	}
	cmd := exec.Command(e.bin)
	cmd.Stdin = &in
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kernel-emu: %v: %s", err, stderr.String())
	}
	if out.Len() != len(sent[0].data) {
		return fmt.Errorf("kernel-emu: %d bytes out for a %d-byte destination", out.Len(), len(sent[0].data))
	}
	copy(sent[0].mem.host, out.Bytes())
	return nil
}

func containsMem(ms []emuMem, m *memory) bool {
	for _, x := range ms {
		if x.mem == m {
			return true
		}
	}
	return false
}

func TestEmulatedCUDAReconstructMatchesReference(t *testing.T) {
	dev := emuDevice(t)
	for i, c := range reconCases() {
		t.Run(c.String(), func(t *testing.T) { checkReconstruct(t, dev, c, uint64(i)) })
	}
}

func TestEmulatedCUDAShiftMatchesReference(t *testing.T) {
	dev := emuDevice(t)
	for i, c := range shiftCases() {
		t.Run(c.String(), func(t *testing.T) { checkShift(t, dev, c, uint64(i)) })
	}
}

func TestEmulatedCUDAPipelineMatchesReference(t *testing.T) {
	dev := emuDevice(t)
	for i, c := range pipelineCases() {
		t.Run(fmt.Sprintf("%v/%v->%v", c.kind, c.factorDT, c.outDT), func(t *testing.T) {
			sc := buildScene(t, c, uint64(i))
			got, _ := runPipeline(t, dev, c, sc)
			for kv, name := range []string{"K", "V"} {
				if !bytes.Equal(got[kv], sc.want[kv]) {
					t.Fatalf("%s: %s", name, firstDiff(&sc.kLay, got[kv], sc.want[kv]))
				}
			}
		})
	}
}
