// Package codec encodes and decodes one chunk: a tensor
// [heads][tokens][head_dim] of a float dtype (f32, f16, bf16), the keys or
// the values of one layer of a packet. The codec of each chunk is a
// format.Codec kept in the packet header; docs/format.md ("Chunk codecs") is
// the specification, this comment the map.
//
// Encode appends a chunk's stored bytes to a buffer; Decode writes the tensor
// straight into a caller's buffer of exactly Desc.RawSize bytes, with no
// full-size intermediate: shuffle-zstd works through one block of pooled
// scratch at a time (128 KiB for bf16), the quantized codecs a group or
// block of rows at a time (AVX2 kernels on amd64, bit for bit the portable
// Go loops), low rank 64 rows at a time. Decode checks every byte it
// interprets, returns an error wrapping format.ErrCorruption for bad bytes,
// never panics, and allocates a bounded amount (one block, at most 1 MiB
// and never more than the tensor, plus zstd's working memory; nothing for
// the quantized codecs up to head_dim 256; for low rank, every head's S
// and Vt, at most twice their stored bytes) whatever the input claims. Encode and Decode are safe for concurrent use;
// DecodeParallel and EncodeParallel run one chunk per goroutine, which is
// enough parallelism for a packet's 2 x layers chunks.
//
// All integers are little endian. N = heads*tokens*head_dim elements of E
// bytes (the dtype's size).
//
// # Raw (format.CodecRaw)
//
// The tensor's N*E bytes as they are.
//
// # Shuffle-zstd (format.CodecShuffleZstd), lossless
//
// The tensor is cut into blocks of B elements (the last may be shorter).
// Each block is byte-shuffled: its plane p holds byte p of each element in
// order (for bf16, plane 0 is the low bytes: low exponent bit and mantissa;
// plane 1 the high bytes: sign and exponent). Each plane is stored on its
// own, as one zstd frame, or as its bytes verbatim when zstd would not make
// it smaller:
//
//	0          4             8                   8+4F
//	| B u32    | F u32       | size u32 x F      | plane 0 of block 0 | plane 1 of block 0 | ... |
//	| >= 1     | =ceil(N/B)*E| stored plane bytes|
//
// A plane of n elements is stored as exactly n bytes when verbatim, and as a
// zstd frame of fewer than n bytes otherwise, so a stored size never exceeds
// its plane and the two cases cannot be confused. The sizes add up to the
// rest of the chunk exactly. The encoder writes B = 65536 and frames without
// zstd's checksum (the chunk's CRC32C covers the stored bytes); the decoder
// accepts any B in [1, 262144].
//
// # Int8 and int4 (format.CodecInt8, format.CodecInt4), lossy
//
// Asymmetric group quantization as in KIVI: a group of elements shares a
// scale s and an offset o (the group's minimum, rounded down to the scale
// dtype); an element x is stored as q = round((x-o)/s) in [0, 2^bits-1] and
// decoded as float32(float32(q)*s) + o, rounded to the chunk's dtype to
// nearest even. Keys are grouped along tokens (per channel: the elements of
// one (head, channel) for G consecutive tokens share parameters), values
// along the head dimension (per token: G consecutive channels of one (head,
// token)); the last group of a row or column is shorter when G does not
// divide it.
//
//	0       1            2          4       5           8
//	| bits  | scale type | G u16    | axis  | 0 0 0     | scales [P] | offsets [P] | data |
//	| 8 | 4 | 1 f32|2 f16| >= 1     | 1 | 2 | reserved  |
//
//	axis 1 (keys):   P = heads*ceil(tokens/G)*head_dim, parameter (h, g, c) at (h*ceil(tokens/G)+g)*head_dim+c
//	axis 2 (values): P = heads*tokens*ceil(head_dim/G), parameter (h, t, j) at (h*tokens+t)*ceil(head_dim/G)+j
//	data:            the N codes in tensor order; int8: one byte each;
//	                 int4: two per byte, even elements in the low nibble, a
//	                 zero high nibble after an odd last element
//
// Scales and offsets are f16 by default (Options.ScaleDType), f32 when asked
// or when the chunk's range does not fit f16. The axis is written from the
// chunk's kind and read back from byte 4, so decoding needs no kind. Every scale is finite and >= 0, every offset finite, and o and
// float32(qmax*s)+o round to finite values of the chunk's dtype, so every
// decoded value is finite; the decoder checks all of it. For an element x of
// a group, |decoded - x| <= s/2 before the final rounding to the dtype (up
// to float32 rounding of the arithmetic).
//
// # Low rank (format.CodecLowRank), lossy
//
// Each head, a tokens x head_dim matrix A, is stored as a truncated SVD
// U diag(S) Vt of rank r (package reconstruct's SVD). Keys are stored
// post-RoPE at positions 0..tokens-1; the encoder un-rotates row t at
// position t first (reconstruct.Unapply), since pre-RoPE keys are of far
// lower rank, and the decoder rebuilds the rows and re-applies RoPE at t in
// the same pass (reconstruct.ReconstructInto, whose arithmetic is fixed),
// then rounds to the chunk's dtype. r is Options.Rank, or the fewest
// components that keep Options.Energy of the head's squared norm (at most
// Options.MaxRank).
//
//	0        1       2         3     4             8
//	| factor | RoPE  | RoPE    | 0   | rotary dims |
//	| dtype  | style | scaling |     | u32         |
//
//	8       16       24          32          40            48          56          64           72
//	| theta | factor | low freq  | high freq | original    | beta fast | beta slow | attention  |
//	| f64   | f64    | factor f64| factor f64| max pos i64 | f64       | f64       | factor f64 |
//
//	72:             rank u16 x heads, each <= min(tokens, head_dim)
//	72+2*heads:     head 0's factors, then head 1's, ...: each in
//	                reconstruct.AppendFactors' encoding ("KVSF", rows =
//	                tokens, cols = head_dim, rank = its rank, dtype = the
//	                factor dtype; 16 bytes, then U, S and Vt)
//
// The RoPE fields are format.RoPE's, as the encoder was given them; K
// chunks have one (style 1 or 2), V chunks none (bytes 1..71 all zero).
// The factor dtype is f16 by default (Options.FactorDType; bf16 and f32 on
// request), f32 when a factor does not fit f16. The chunk's length is
// exactly what the header and ranks give; the decoder checks that, each
// factor descriptor against the chunk, every singular value finite and
// >= 0, the RoPE as format validates a model's, and every reconstructed
// element finite in the chunk's dtype. The encoder refuses rows longer
// than half the dtype's range (over YaRN's attention factor): truncation
// never lengthens a row, so its chunks always decode.
package codec
