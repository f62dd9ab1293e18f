//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp

import "unsafe"

// The C structs this binding passes by value, mirrored field for field from
// include/llama.h of llama.cpp v0.5.0 (the source node-llama-cpp 3.22.1 was
// built from). Go lays them out as the C compiler does on linux/amd64; the
// sizes are asserted below and the library's version is checked at load,
// so a library of another ABI is refused instead of being called wrongly.

// ABIVersion is the llama_version() this binding was written against.
const ABIVersion = "0.5.0"

const (
	sizeModelParams   = 80
	sizeContextParams = 160
	sizeBatch         = 56
)

type modelParams struct {
	devices             uintptr
	tensorBuftOverrides uintptr
	nGPULayers          int32
	splitMode           int32
	loadMode            int32
	lazyMode            int32
	mainGPU             int32
	tensorSplit         uintptr // 40
	progressCallback    uintptr
	progressUserData    uintptr
	kvOverrides         uintptr
	vocabOnly           bool // 72
	checkTensors        bool
	useExtraBufts       bool
	noHost              bool
	noAlloc             bool
	loadMTP             bool
}

type contextParams struct {
	nCtx, nBatch, nUbatch, nSeqMax   uint32
	nRsSeq, nOutputsMax, nOutputsSeq uint32
	nThreads, nThreadsBatch          int32
	ctxType, ropeScalingType         int32
	poolingType, attentionType       int32
	flashAttnType                    int32 // 52
	ropeFreqBase, ropeFreqScale      float32
	yarnExtFactor, yarnAttnFactor    float32
	yarnBetaFast, yarnBetaSlow       float32
	yarnOrigCtx                      uint32
	defragThold                      float32
	cbEval, cbEvalUserData           uintptr // 88
	typeK, typeV                     int32   // 104
	abortCallback, abortCallbackData uintptr // 112
	embeddings, offloadKQV, noPerf   bool    // 128
	opOffload, swaFull, kvUnified    bool
	samplers                         uintptr // 136
	nSamplers                        uintptr
	ctxOther                         uintptr // 152
}

type batch struct {
	nTokens int32
	token   uintptr // *int32
	embd    uintptr // *float32
	pos     uintptr // *int32
	nSeqID  uintptr // *int32
	seqID   uintptr // **int32
	logits  uintptr // *int8
}

// Compile-time checks of the mirrored sizes and of the offsets the header
// gives for fields this binding sets.
var (
	_ [1]struct{} = [unsafe.Sizeof(modelParams{}) - sizeModelParams + 1]struct{}{}
	_ [1]struct{} = [unsafe.Sizeof(contextParams{}) - sizeContextParams + 1]struct{}{}
	_ [1]struct{} = [unsafe.Sizeof(batch{}) - sizeBatch + 1]struct{}{}
	_ [1]struct{} = [unsafe.Offsetof(modelParams{}.tensorSplit) - 40 + 1]struct{}{}
	_ [1]struct{} = [unsafe.Offsetof(modelParams{}.vocabOnly) - 72 + 1]struct{}{}
	_ [1]struct{} = [unsafe.Offsetof(contextParams{}.flashAttnType) - 52 + 1]struct{}{}
	_ [1]struct{} = [unsafe.Offsetof(contextParams{}.cbEval) - 88 + 1]struct{}{}
	_ [1]struct{} = [unsafe.Offsetof(contextParams{}.typeK) - 104 + 1]struct{}{}
	_ [1]struct{} = [unsafe.Offsetof(contextParams{}.embeddings) - 128 + 1]struct{}{}
	_ [1]struct{} = [unsafe.Offsetof(contextParams{}.kvUnified) - 133 + 1]struct{}{}
	_ [1]struct{} = [unsafe.Offsetof(contextParams{}.samplers) - 136 + 1]struct{}{}
)

// ggml_type values of the cache types this binding offers.
const (
	ggmlF32  = 0
	ggmlF16  = 1
	ggmlBF16 = 30
)

// llama_flash_attn_type.
const (
	flashAttnDisabled = 0
	flashAttnEnabled  = 1
)
