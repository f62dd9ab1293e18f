package gpu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

var (
	floatTypes = []format.DType{format.DTypeF32, format.DTypeF16, format.DTypeBF16}
	layoutKind = []LayoutKind{LayoutHND, LayoutPagedNHD}
)

// reconCase is one kernel test: spans of factors of factorDT rebuilt into
// a layout of outDT.
type reconCase struct {
	kind            LayoutKind
	factorDT, outDT format.DType
	rope            string // key of ropeConfigs, "" for values
	heads, headDim  int
	gates           bool
}

func (c reconCase) String() string {
	return fmt.Sprintf("%v/%v->%v/%s/hd%d/gates=%v", c.kind, c.factorDT, c.outDT, c.rope, c.headDim, c.gates)
}

// reconCases covers every layout x factor dtype x output dtype, each RoPE
// variant, values, gates, rank 0 and partial rotary.
func reconCases() []reconCase {
	var cs []reconCase
	ropes := []string{"rotate-half-llama3", "interleaved", "partial-yarn", ""}
	n := 0
	for _, k := range layoutKind {
		for _, fd := range floatTypes {
			for _, od := range floatTypes {
				cs = append(cs, reconCase{kind: k, factorDT: fd, outDT: od, rope: ropes[n%len(ropes)],
					heads: 3, headDim: []int{16, 8, 32}[n%3], gates: n%2 == 0})
				n++
			}
		}
	}
	return cs
}

// checkReconstruct runs c on dev through a Reconstructor and compares the
// whole destination, bit for bit, with reconstruct.ReconstructBytes rows
// placed into a sentinel-filled image.
func checkReconstruct(t *testing.T, dev Device, c reconCase, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rope *reconstruct.RoPE
	if c.rope != "" {
		rope = mustRoPE(t, ropeConfigs(c.headDim)[c.rope], c.headDim)
	}
	lay, table := testLayout(rng, c.kind, c.outDT, c.heads, c.headDim, 50)
	want := filled(lay.Bytes(), sentinel)
	// Spans: varying rows and ranks (rank 0 included), each written to a
	// distinct (head, token range); all factor blocks in one buffer.
	var (
		factorBytes []byte
		targets     []Target
		spans       []*Span
	)
	token := 0
	for i := 0; token < lay.Tokens-14; i++ {
		rows := min(1+rng.IntN(13), lay.Tokens-token)
		rank := rng.IntN(min(7, c.headDim, rows) + 1) // an SVD's rank is at most min(rows, cols)
		if i == 1 {
			rank = 0
		}
		f, enc := randFactors(t, rng, rows, c.headDim, rank, c.factorDT)
		off := len(factorBytes)
		factorBytes = append(factorBytes, enc...)
		factorBytes = append(factorBytes, make([]byte, alignUp(len(factorBytes), ArenaAlign)-len(factorBytes))...)
		tg := Target{Head: i % c.heads, Token: token, Rotate: rope != nil}
		if c.gates {
			tg.Gates = make([]float32, rank)
			for g := range tg.Gates {
				tg.Gates[g] = float32(rng.Float64())
			}
		}
		var pos []int64
		if rope != nil {
			// Explicit positions on odd spans, Token+i on even ones.
			pos = make([]int64, rows)
			for r := range pos {
				pos[r] = int64(token + r)
			}
			if i%2 == 1 {
				for r := range pos {
					pos[r] = int64(1000*i + 7*r)
				}
				tg.Positions = pos
			}
		}
		rowBytes := make([]byte, rows*c.headDim*c.outDT.Size())
		if err := reconstruct.ReconstructBytes(rowBytes, c.outDT, f, tg.Gates, rope, pos); err != nil {
			t.Fatal(err)
		}
		placeRows(t, want, &lay, table, tg.Head, token, rowBytes)
		targets = append(targets, tg)
		spans = append(spans, &Span{Layout: reconstruct.FactorLayout{Rows: rows, Cols: c.headDim, Rank: rank, DType: c.factorDT},
			Buffer: Buffer{off: off, n: len(enc)}})
		token += rows + rng.IntN(3)
	}
	factors := upload(t, dev, s, factorBytes)
	ready, _ := dev.NewEvent()
	for _, sp := range spans {
		sp.Buffer.mem, sp.Ready = factors.mem, ready
	}
	out := Output{Layout: lay, Dst: upload(t, dev, s, filled(lay.Bytes(), sentinel)), Table: upload(t, dev, s, EncodeTable(table))}
	r, err := NewReconstructor(dev, rope, s, ReconstructorOptions{BatchJobs: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Run(factors, out, targets, spans); err != nil {
		t.Fatal(err)
	}
	got := download(t, s, out.Dst)
	if !bytes.Equal(got, want) {
		t.Fatalf("%v: destination differs from the reference: %s", c, firstDiff(&lay, got, want))
	}
}

func TestReconstructMatchesReference(t *testing.T) {
	for i, c := range reconCases() {
		t.Run(c.String(), func(t *testing.T) { checkReconstruct(t, CPU(), c, uint64(i)) })
	}
}

// shiftCase is one packet layer shifted into a layout.
type shiftCase struct {
	kind          LayoutKind
	srcDT, outDT  format.DType
	rope          string
	delta         int64
	rotate        bool
	headDim, toks int
}

func (c shiftCase) String() string {
	return fmt.Sprintf("%v/%v->%v/%s/delta%d/rotate=%v", c.kind, c.srcDT, c.outDT, c.rope, c.delta, c.rotate)
}

func shiftCases() []shiftCase {
	var cs []shiftCase
	ropes := []string{"rotate-half-llama3", "interleaved", "partial-yarn"}
	n := 0
	for _, k := range layoutKind {
		for _, sd := range floatTypes {
			for _, od := range floatTypes {
				cs = append(cs, shiftCase{kind: k, srcDT: sd, outDT: od, rope: ropes[n%3],
					delta: []int64{137, -5, 0, 100000}[n%4], rotate: n%5 != 4, headDim: []int{16, 8}[n%2], toks: 11})
				n++
			}
		}
	}
	return cs
}

// packetLayer makes a random [heads][tokens][head_dim] layer of dt with
// zeros, subnormals and large values mixed in.
func packetLayer(rng *rand.Rand, dt format.DType, n int) []byte {
	v := make([]float32, n)
	for i := range v {
		switch i % 17 {
		case 3:
			v[i] = 0
		case 5:
			v[i] = float32(math.Copysign(3e-6, rng.NormFloat64())) // an f16 subnormal
		case 7:
			v[i] = float32(rng.NormFloat64() * 3e4)
		default:
			v[i] = float32(rng.NormFloat64())
		}
	}
	b := make([]byte, n*dt.Size())
	format.FromF32(b, v, dt)
	return b
}

func checkShift(t *testing.T, dev Device, c shiftCase, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const heads = 2
	rope := mustRoPE(t, ropeConfigs(c.headDim)[c.rope], c.headDim)
	lay, table := testLayout(rng, c.kind, c.outDT, heads, c.headDim, 3*c.toks)
	src := packetLayer(rng, c.srcDT, heads*c.toks*c.headDim)
	// Reference: reconstruct.Shift in the source dtype, or ShiftF32 then
	// one rounding to the output dtype when they differ.
	ref := make([]byte, heads*c.toks*c.headDim*c.outDT.Size())
	delta := c.delta
	if !c.rotate {
		delta = 0
	}
	if c.srcDT == c.outDT {
		if err := reconstruct.Shift(ref, src, c.srcDT, rope, heads, c.toks, delta); err != nil {
			t.Fatal(err)
		}
	} else {
		x := make([]float32, heads*c.toks*c.headDim)
		format.ToF32(x, src, c.srcDT)
		y := make([]float32, len(x))
		if err := reconstruct.ShiftF32(y, x, rope, heads, c.toks, delta); err != nil {
			t.Fatal(err)
		}
		format.FromF32(ref, y, c.outDT)
	}
	const at = 5 // destination token of source token 0
	want := filled(lay.Bytes(), sentinel)
	rb := c.toks * c.headDim * c.outDT.Size()
	for h := range heads {
		placeRows(t, want, &lay, table, h, at, ref[h*rb:(h+1)*rb])
	}
	var tableBytes []byte
	if delta != 0 {
		tableBytes = appendF32(nil, ShiftTable(rope, delta))
	}
	launch := &ShiftLaunch{Layout: lay, Dst: upload(t, dev, s, filled(lay.Bytes(), sentinel)),
		Table: upload(t, dev, s, EncodeTable(table)), Src: upload(t, dev, s, src), SrcDType: c.srcDT,
		Tokens: c.toks, Token: at, CosSin: upload(t, dev, s, tableBytes), Rotary: rope.Rotary(), Style: rope.Config().Style}
	if err := s.Shift(launch); err != nil {
		t.Fatal(err)
	}
	got := download(t, s, launch.Dst)
	if !bytes.Equal(got, want) {
		t.Fatalf("%v: destination differs from the reference: %s", c, firstDiff(&lay, got, want))
	}
}

func TestShiftMatchesReference(t *testing.T) {
	for i, c := range shiftCases() {
		t.Run(c.String(), func(t *testing.T) { checkShift(t, CPU(), c, uint64(i)) })
	}
}

// TestCosSinMatchesRoPE: rotating with the table is RoPE.Apply (and
// Rotate without the scale), bit for bit, for every variant.
func TestCosSinMatchesRoPE(t *testing.T) {
	const hd = 16
	rng := rand.New(rand.NewPCG(3, 4))
	configs := ropeConfigs(hd)
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		cfg := configs[name]
		t.Run(name, func(t *testing.T) {
			r := mustRoPE(t, cfg, hd)
			for _, apply := range []bool{true, false} {
				for _, pos := range []int64{0, 1, 17, 4095, 131071, -9} {
					x := make([]float32, hd)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					want := append([]float32(nil), x...)
					if apply {
						r.Apply(want, pos)
					} else {
						r.Rotate(want, pos)
					}
					cs := CosSin(nil, r, []int64{pos}, apply)
					rotatePairs(x, r.Rotary(), cfg.Style, cs[:r.Rotary()/2], cs[r.Rotary()/2:])
					for i := range x {
						if math.Float32bits(x[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s apply=%v pos %d dim %d: table rotation %v, RoPE %v", name, apply, pos, i, x[i], want[i])
						}
					}
				}
			}
		})
	}
}

// TestReconstructRejectsBadJobs: the CPU kernel refuses jobs that point
// outside their buffers, as the CUDA kernel skips them.
func TestReconstructRejectsBadJobs(t *testing.T) {
	dev := CPU()
	s, _ := dev.NewStream()
	defer s.Close()
	lay := Layout{Kind: LayoutHND, DType: format.DTypeF32, Heads: 2, HeadDim: 4, Tokens: 8}
	dst, _ := dev.Alloc(lay.Bytes())
	factors, _ := dev.Alloc(1024)
	aux, _ := dev.Alloc(1024)
	good := Job{Factors: 0, CosSin: -1, Gates: -1, Rows: 2, Rank: 1, Head: 1, Token: 6, DType: format.DTypeF32}
	for _, tc := range []struct {
		name string
		mod  func(*Job)
	}{
		{"rows past the layout", func(j *Job) { j.Token = 7 }},
		{"head out of range", func(j *Job) { j.Head = 2 }},
		{"factors past buffer", func(j *Job) { j.Factors = 1000 }},
		{"unaligned factors", func(j *Job) { j.Factors = 2 }},
		{"gates past aux", func(j *Job) { j.Gates = 1022 }},
		{"table without rotary", func(j *Job) { j.CosSin = 0 }},
		{"bad dtype", func(j *Job) { j.DType = format.DTypeInt8 }},
		{"rank above max", func(j *Job) { j.Rank = 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := good
			tc.mod(&j)
			jobs := upload(t, dev, s, EncodeJobs([]Job{j}))
			err := s.Reconstruct(&ReconstructLaunch{Layout: lay, Dst: dst, Factors: factors, Aux: aux, Jobs: jobs,
				NumJobs: 1, MaxRows: 2, MaxRank: 2})
			if err != nil {
				t.Fatalf("%s: enqueue: %v", tc.name, err)
			}
			if err := s.Synchronize(); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s: kernel error %v, want ErrInvalidArgument", tc.name, err)
			}
		})
	}
	jobs := upload(t, dev, s, EncodeJobs([]Job{good}))
	s.Reconstruct(&ReconstructLaunch{Layout: lay, Dst: dst, Factors: factors, Aux: aux, Jobs: jobs, NumJobs: 1, MaxRows: 2, MaxRank: 2})
	if err := s.Synchronize(); err != nil {
		t.Fatalf("good job: %v", err)
	}
}

func TestJobEncoding(t *testing.T) {
	j := Job{Factors: 1 << 40, CosSin: -1, Gates: 4096, Rows: 77, Rank: 32, Head: 7, Token: 1 << 30, DType: format.DTypeBF16}
	b := EncodeJobs([]Job{j, j})
	if len(b) != 2*JobSize {
		t.Fatalf("%d bytes for 2 jobs", len(b))
	}
	if got := decodeJob(b[JobSize:]); got != j {
		t.Fatalf("round trip %+v, want %+v", got, j)
	}
	if binary.LittleEndian.Uint64(b[8:]) != math.MaxUint64 {
		t.Fatal("-1 offset not encoded as all ones")
	}
}
