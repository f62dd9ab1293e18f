// Package reconstruct is the math of kvstore: the CPU reference of
// everything the GPU does, and the implementation the engine runs when there
// is no GPU. It does no I/O.
//
//   - RoPE: rotary position embeddings as HF transformers defines them
//     (rotate-half and interleaved pairs, partial rotary, theta, and
//     none / linear / llama3 / YaRN (truncated or not, with DeepSeek's
//     mscale attention factor) / dynamic NTK frequency scaling; dynamic
//     NTK by sequence length, RoPE.AtLength).
//   - Shift: re-rotating stored post-RoPE keys by a position delta, one
//     rotation per dimension pair shared by every token (KV Packet's
//     k' = R(delta) k), in f32, f16 and bf16, with AVX2 kernels on amd64
//     (and AVX-512 ones for rotate-half bf16, rounding with AVX512_BF16
//     where the CPU has it) that match the portable Go bit for bit;
//     ShiftRows at strides, into a paged cache's slots, and StreamRows,
//     the same with non-temporal stores ordered by Fence.
//   - Randomized truncated SVD of span keys (pre-RoPE) and values, and
//     reconstruction K^ = sum_i m_i sigma_i u_i v_i^T with RoPE applied for
//     the target positions in the same pass (SeKV).
//   - Routing: scoring queries against span summaries and the budgeted
//     selection of spans to zoom in.
//
// Math is float32 unless said otherwise; rounding to narrower storage types
// is round-to-nearest-even, as in package format. Errors wrap
// format.ErrInvalidArgument.
package reconstruct
