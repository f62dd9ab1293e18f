package gpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// ReconstructLaunch is one launch of the fused low-rank reconstruction +
// RoPE kernel (kernels/reconstruct.cu; cpuReconstruct on the CPU device).
// Each job rebuilds one head of one span, rows x HeadDim, from its factors
//
//	K^[t][d] = sum_i (g_i*S_i*U[t][i]) * Vt[i][d]      (i = 0..rank-1, in order)
//
// rotates it for its target positions with a precomputed cos/sin table,
// rounds it to Layout.DType and writes row t at layout token Token+t. See
// Job and cpuReconstruct for the exact order of the float32 operations,
// which both devices share so that f32 results are bit-identical.
//
// All buffers belong to the stream's device. The kernel reads Factors, Aux
// and Jobs and writes only the destination rows of its jobs.
type ReconstructLaunch struct {
	Layout Layout
	Dst    Buffer // Layout.Bytes() bytes
	Table  Buffer // paged: 4*Layout.TableLen() bytes of int32 block ids
	// Factors holds the factor blocks and Aux the cos/sin tables and gates
	// that jobs address by byte offset (e.g. the prefetcher's arena).
	Factors Buffer
	Aux     Buffer
	Jobs    Buffer // NumJobs records of JobSize bytes (EncodeJobs)
	NumJobs int
	// MaxRows and MaxRank are at least every job's Rows and Rank; they
	// size the launch grid and the kernel's shared memory.
	MaxRows int
	MaxRank int
	// Rotary is the number of rotated dimensions (the RoPE's Rotary()),
	// Style the pairing; jobs without a cos/sin table are not rotated.
	Rotary int
	Style  format.RoPEStyle
}

// Job is one head of one span in a ReconstructLaunch.
type Job struct {
	// Factors is the byte offset in the launch's Factors buffer of the
	// span's factors as reconstruct.AppendFactors encodes them: a 16-byte
	// descriptor, then U (Rows x Rank), S (Rank) and Vt (Rank x HeadDim),
	// row major, elements of DType. The kernel reads the arrays only; the
	// host checked the descriptor (reconstruct.ParseFactorLayout).
	Factors int64
	// CosSin is the byte offset in Aux of Rows x Rotary float32, row t
	// holding Rotary/2 cosines then Rotary/2 sines of row t's target
	// position (scaled as RoPE.Apply scales them), or -1 for no rotation.
	CosSin int64
	// Gates is the byte offset in Aux of Rank float32 rank gates m_i, or
	// -1 for all ones.
	Gates int64
	Rows  int32
	Rank  int32 // may be 0: the rows come out zero
	Head  int32 // destination head
	Token int32 // destination (logical) token of row 0
	DType format.DType
}

// JobSize is the size of an encoded Job:
//
//	0  int64 factors offset
//	8  int64 cos/sin offset (-1: none)
//	16 int64 gates offset (-1: none)
//	24 int32 rows    28 int32 rank    32 int32 head    36 int32 token
//	40 int32 factor dtype             44 int32 zero
const JobSize = 48

// EncodeJobs encodes jobs as the little-endian records the kernels read.
func EncodeJobs(jobs []Job) []byte {
	b := make([]byte, JobSize*len(jobs))
	for i := range jobs {
		jobs[i].put(b[JobSize*i:])
	}
	return b
}

func (j *Job) put(b []byte) {
	le := binary.LittleEndian
	le.PutUint64(b[0:], uint64(j.Factors))
	le.PutUint64(b[8:], uint64(j.CosSin))
	le.PutUint64(b[16:], uint64(j.Gates))
	le.PutUint32(b[24:], uint32(j.Rows))
	le.PutUint32(b[28:], uint32(j.Rank))
	le.PutUint32(b[32:], uint32(j.Head))
	le.PutUint32(b[36:], uint32(j.Token))
	le.PutUint32(b[40:], uint32(j.DType))
	le.PutUint32(b[44:], 0)
}

func decodeJob(b []byte) Job {
	le := binary.LittleEndian
	return Job{
		Factors: int64(le.Uint64(b[0:])), CosSin: int64(le.Uint64(b[8:])), Gates: int64(le.Uint64(b[16:])),
		Rows: int32(le.Uint32(b[24:])), Rank: int32(le.Uint32(b[28:])),
		Head: int32(le.Uint32(b[32:])), Token: int32(le.Uint32(b[36:])),
		DType: format.DType(le.Uint32(b[40:])),
	}
}

// MaxRank bounds a job's rank (the factor encoding allows up to the head
// dimension); the CUDA kernel keeps a row's coefficients in shared memory.
const MaxRank = format.MaxHeadDim

// check validates a job against the launch's buffers and layout, as the
// kernels do before touching memory (the CUDA kernel skips a bad job, the
// CPU kernel fails with this error).
func (j *Job) check(l *ReconstructLaunch) error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: reconstruct job: %s", ErrInvalidArgument, fmt.Sprintf(f, a...))
	}
	hd := int64(l.Layout.HeadDim)
	rows, rank := int64(j.Rows), int64(j.Rank)
	switch {
	case rows <= 0 || rows > int64(l.MaxRows):
		return bad("rows %d not in [1, max rows %d]", rows, l.MaxRows)
	case rank < 0 || rank > int64(l.MaxRank):
		return bad("rank %d not in [0, max rank %d]", rank, l.MaxRank)
	case !j.DType.Float():
		return bad("factor dtype %v", j.DType)
	case j.Head < 0 || int(j.Head) >= l.Layout.Heads:
		return bad("head %d not in [0, %d)", j.Head, l.Layout.Heads)
	case j.Token < 0 || int64(j.Token)+rows > int64(l.Layout.Tokens):
		return bad("tokens [%d, +%d) outside %d", j.Token, rows, l.Layout.Tokens)
	case !inRange(j.Factors, factorHeader+int64(j.DType.Size())*(rows*rank+rank+rank*hd), l.Factors.Len()):
		return bad("factors at %d (%d x %d, rank %d) outside a %d-byte buffer", j.Factors, rows, hd, rank, l.Factors.Len())
	case j.CosSin != -1 && (l.Rotary == 0 || !inRange(j.CosSin, 4*rows*int64(l.Rotary), l.Aux.Len())):
		return bad("cos/sin table at %d for %d rows outside a %d-byte aux buffer (rotary %d)", j.CosSin, rows, l.Aux.Len(), l.Rotary)
	case j.Gates != -1 && !inRange(j.Gates, 4*rank, l.Aux.Len()):
		return bad("gates at %d outside a %d-byte aux buffer", j.Gates, l.Aux.Len())
	}
	return nil
}

// factorHeader is the size of the factor descriptor before U.
const factorHeader = reconstruct.FactorHeaderSize

// inRange reports whether [off, off+n) lies within [0, size) and off is
// 4-byte aligned.
func inRange(off, n int64, size int) bool {
	return off >= 0 && off%4 == 0 && n >= 0 && off <= int64(size) && n <= int64(size)-off
}

// check validates the launch on the host before it is enqueued.
func (l *ReconstructLaunch) check(dev any) error {
	if err := checkOut(dev, "reconstruct", &l.Layout, l.Dst, l.Table, l.Rotary, l.Style); err != nil {
		return err
	}
	for _, b := range []Buffer{l.Factors, l.Aux, l.Jobs} {
		if err := b.ownedBy(dev, "reconstruct"); err != nil {
			return err
		}
	}
	switch {
	case l.NumJobs < 0 || l.NumJobs > math.MaxInt32 || l.Jobs.Len()/JobSize < l.NumJobs:
		return fmt.Errorf("%w: reconstruct: %d jobs in a %d-byte job buffer", ErrInvalidArgument, l.NumJobs, l.Jobs.Len())
	case l.MaxRows <= 0 || l.MaxRows > math.MaxInt32:
		return fmt.Errorf("%w: reconstruct: max rows %d", ErrInvalidArgument, l.MaxRows)
	case l.MaxRank < 0 || l.MaxRank > MaxRank:
		return fmt.Errorf("%w: reconstruct: max rank %d not in [0, %d]", ErrInvalidArgument, l.MaxRank, MaxRank)
	}
	return nil
}

// checkOut validates a kernel's destination.
func checkOut(dev any, what string, lay *Layout, dst, table Buffer, rotary int, style format.RoPEStyle) error {
	if err := lay.Validate(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, b := range []Buffer{dst, table} {
		if err := b.ownedBy(dev, what); err != nil {
			return err
		}
	}
	switch {
	case dst.Len() != lay.Bytes():
		return fmt.Errorf("%w: %s: destination of %d bytes for a %d-byte layout", ErrInvalidArgument, what, dst.Len(), lay.Bytes())
	case table.Len() != 4*lay.TableLen():
		return fmt.Errorf("%w: %s: block table of %d bytes, layout needs %d", ErrInvalidArgument, what, table.Len(), 4*lay.TableLen())
	case rotary < 0 || rotary%2 != 0 || rotary > lay.HeadDim:
		return fmt.Errorf("%w: %s: rotary dims %d not even and in [0, %d]", ErrInvalidArgument, what, rotary, lay.HeadDim)
	case rotary > 0 && style != format.RoPERotateHalf && style != format.RoPEInterleaved:
		return fmt.Errorf("%w: %s: rope style %v", ErrInvalidArgument, what, style)
	}
	return nil
}

// ShiftLaunch is one launch of the RoPE shift + scatter kernel
// (kernels/shift.cu; cpuShift on the CPU device): it reads one packet
// layer's K or V, [Layout.Heads][Tokens][Layout.HeadDim] elements of
// SrcDType, rotates every token by the same angle table (keys shifted by
// delta positions; no table for values or delta 0, which copy exactly but
// for signalling NaNs, which come out quiet),
// rounds to Layout.DType and writes source token t at layout token Token+t.
// Each pair is rotated as reconstruct.Shift rotates it, so results equal
// reconstruct.Shift's bit for bit when the dtypes match.
type ShiftLaunch struct {
	Layout   Layout
	Dst      Buffer
	Table    Buffer
	Src      Buffer
	SrcDType format.DType
	Tokens   int
	Token    int // destination (logical) token of source token 0
	// CosSin holds Rotary/2 cosines then Rotary/2 sines (float32) of
	// delta*InvFreq; empty means no rotation.
	CosSin Buffer
	Rotary int
	Style  format.RoPEStyle
}

func (l *ShiftLaunch) check(dev any) error {
	if err := checkOut(dev, "shift", &l.Layout, l.Dst, l.Table, l.Rotary, l.Style); err != nil {
		return err
	}
	for _, b := range []Buffer{l.Src, l.CosSin} {
		if err := b.ownedBy(dev, "shift"); err != nil {
			return err
		}
	}
	lay := &l.Layout
	switch {
	case !l.SrcDType.Float():
		return fmt.Errorf("%w: shift: source dtype %v", ErrInvalidArgument, l.SrcDType)
	case l.Tokens < 0 || l.Token < 0 || int64(l.Token)+int64(l.Tokens) > int64(lay.Tokens):
		return fmt.Errorf("%w: shift: tokens [%d, +%d) outside %d", ErrInvalidArgument, l.Token, l.Tokens, lay.Tokens)
	case int64(l.Src.Len()) != lay.elems(l.Tokens)*int64(l.SrcDType.Size()):
		return fmt.Errorf("%w: shift: source of %d bytes for %d x %d x %d %v", ErrInvalidArgument, l.Src.Len(), lay.Heads, l.Tokens, lay.HeadDim, l.SrcDType)
	case l.CosSin.Len() != 0 && (l.Rotary == 0 || l.CosSin.Len() != 4*l.Rotary):
		return fmt.Errorf("%w: shift: cos/sin table of %d bytes for rotary %d", ErrInvalidArgument, l.CosSin.Len(), l.Rotary)
	}
	return nil
}
