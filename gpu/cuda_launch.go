package gpu

import "math"

// Kernel parameter blocks, passed by value to the kernels. They mirror the
// structs of kernels/common.cuh, reconstruct.cu and shift.cu field for
// field; every field is naturally aligned so Go and C agree on the layout
// (sizes pinned by TestParamLayout).

// cuLayout mirrors struct Layout (48 bytes).
type cuLayout struct {
	Dst, Table                     uint64
	Kind, DType, Heads, HeadDim    int32
	Tokens, BlockSize, Blocks, pad int32
}

// cuReconParams mirrors struct ReconParams (120 bytes).
type cuReconParams struct {
	Out                               cuLayout
	Factors, FactorsLen, Aux, AuxLen  uint64
	Jobs                              uint64
	NumJobs, Rotary, Style, MaxRows   int32
	MaxRank, RowsPerBlock, pad0, pad1 int32
}

// cuShiftParams mirrors struct ShiftParams (96 bytes).
type cuShiftParams struct {
	Out                             cuLayout
	Src, CosSin                     uint64
	SrcDType, Tokens, Token, Rotary int32
	Style, pad0, pad1, pad2         int32
}

const (
	reconThreads = 256
	shiftThreads = 256
	// maxShared is the dynamic shared memory a launch may ask for without
	// opting in to more (48 KiB on every CUDA device).
	maxShared = 48 << 10
)

func layoutParams(l *Layout, dst, table Buffer) cuLayout {
	return cuLayout{
		Dst: dst.Ptr(), Table: table.Ptr(),
		Kind: int32(l.Kind), DType: int32(l.DType), Heads: int32(l.Heads), HeadDim: int32(l.HeadDim),
		Tokens: int32(l.Tokens), BlockSize: int32(l.BlockSize), Blocks: int32(l.Blocks),
	}
}

// rowsPerBlock is how many rows one CTA of the reconstruction kernel
// rebuilds: about 1024 elements' worth, within the shared memory limit.
func rowsPerBlock(headDim, maxRank, maxRows int) int {
	r := max(1, min(1024/headDim, maxRows))
	for r > 1 && 4*r*(maxRank+headDim) > maxShared {
		r /= 2
	}
	return r
}

func reconParams(k *ReconstructLaunch) cuReconParams {
	return cuReconParams{
		Out:     layoutParams(&k.Layout, k.Dst, k.Table),
		Factors: k.Factors.Ptr(), FactorsLen: uint64(k.Factors.Len()),
		Aux: k.Aux.Ptr(), AuxLen: uint64(k.Aux.Len()),
		Jobs:    k.Jobs.Ptr(),
		NumJobs: int32(k.NumJobs), Rotary: int32(k.Rotary), Style: int32(k.Style), MaxRows: int32(k.MaxRows),
		MaxRank: int32(k.MaxRank), RowsPerBlock: int32(rowsPerBlock(k.Layout.HeadDim, k.MaxRank, k.MaxRows)),
	}
}

func shiftParams(k *ShiftLaunch) cuShiftParams {
	var cossin uint64 // 0 tells the kernel not to rotate
	if k.CosSin.Len() != 0 {
		cossin = k.CosSin.Ptr()
	}
	return cuShiftParams{
		Out: layoutParams(&k.Layout, k.Dst, k.Table),
		Src: k.Src.Ptr(), CosSin: cossin,
		SrcDType: int32(k.SrcDType), Tokens: int32(k.Tokens), Token: int32(k.Token), Rotary: int32(k.Rotary),
		Style: int32(k.Style),
	}
}

// reconGrid is the reconstruction kernel's grid (row tiles x jobs) and
// dynamic shared memory: coefficients [R][MaxRank] and rows [R][HeadDim].
func reconGrid(k *ReconstructLaunch, p *cuReconParams) (grid [3]uint32, shared uint32) {
	r := int(p.RowsPerBlock)
	grid = [3]uint32{uint32((k.MaxRows + r - 1) / r), uint32(min(k.NumJobs, 65535)), 1}
	return grid, uint32(4 * r * (k.MaxRank + k.Layout.HeadDim))
}

// shiftGrid is the shift kernel's grid for n elements: enough CTAs to fill
// the device (32 per SM), each striding over the rest.
func shiftGrid(n int64, sms int) [3]uint32 {
	blocks := min((n+shiftThreads-1)/shiftThreads, int64(32*max(1, sms)), math.MaxInt32)
	return [3]uint32{uint32(blocks), 1, 1}
}
