// Package quality measures how well SeKV span memory, stored in and read
// back from a kvstore store, stands in for a model's full KV cache. It runs
// lab/llama models (stories260K's real weights, and random-weight
// models of any shape) and reports two things:
//
//   - Reconstruction error against rank: per factored span, (layer, KV
//     head), the relative Frobenius error sqrt(sum ||A - A_r||^2 / sum ||A||^2)
//     of reconstruct.SVD at a fixed rank r, for pre-RoPE keys (what is
//     stored), post-RoPE keys (for contrast: why keys are un-rotated first)
//     and values.
//   - KL(p_full || p_method) of the next-token distributions over a held-out
//     continuation, decoded step by step with teacher forcing, at GPU
//     budgets that are fractions of the full context KV, for span memory and
//     two baselines.
//
// # The decode loop
//
// A context of N tokens (sampled from the model) is prefilled with full
// attention; its cache is what every method starts from. The continuation's
// T tokens are then fed one at a time (llama.Model.Step), each layer's
// attention computed over the method's rows of the context followed by the
// continuation tokens decoded so far (and the token itself), whose keys and
// values each method computes with its own hidden states and keeps in full.
// p_full comes from the same loop over all N context rows: it equals
// llama's Forward bit for bit (tested).
//
// # What counts against the budget
//
// A budget f gives each (layer, KV head) B = floor(f*N) GPU-resident KV rows
// (a row is one key and one value of head_dim). The continuation's rows are
// kept by every method and not counted; factor bytes on the host are not
// GPU memory and not counted (the bytes moved per step are reported).
//
//   - window: the first 4 tokens (attention sinks) and the last B-4 context
//     tokens (StreamingLLM), B rows per group.
//   - top-surprisal: the B context tokens of highest surprisal (token 0,
//     whose surprisal is unknown, first), B rows per group.
//   - span: the resident rows (anchors, sinks first then by descending
//     surprisal, at most floor(AnchorShare*B); and the tokens of spans too
//     short to factor, which have no factors), plus the rows of the spans
//     zoomed in, reconstructed from their stored factors with RoPE at their
//     positions (the anchors inside them are not counted twice). Zoom-in is
//     store.Routing's: per (layer, KV head) alpha = sigmoid(W q . s / sqrt(d))
//     with the PCA default W and tau = 0.05, spans taken in descending alpha
//     while they fit (Budget.Fill: a span that does not fit is skipped); the
//     budget of a layer, KVHeads*(B - resident - summaries) rows, is shared by
//     its KV heads, and each layer routes with its own step's queries.
//   - span+sum: the same, and each factored span not zoomed in is attended
//     as one entry, its summary key (RoPE'd at the mean position of its
//     tokens not resident) and value with a logit bias of ln(n) for the n
//     tokens it stands for. The summaries are on the GPU in any case (they
//     are what routing reads); here they also cost their rows: each is a
//     key, a value and a d'-dim projected key, (2*head_dim+d')/(2*head_dim)
//     rows, for every factored span, zoomed or not.
//
// Reported per method and budget: the mean KL over the T steps, the share
// of steps whose argmax matches full attention's, and the mean GPU rows per
// (layer, KV head) actually used, as a fraction of N.
//
// # Long context
//
// RunNeedles and RunLongText (longctx.go) put the methods side by side on
// gocode-2k's 2,048-token windows of held-out Go, each built from the
// context alone before the recall line (or the scored tail) is seen, as a
// stored memory is, and decoded with the same loop: needles
// (`const NAME = "VALUE"` at a depth, `\treturn NAME // "VALUE"` at the
// end, the value's bytes scored teacher-forced), several definitions with
// one recalled, and KL over the last bytes of natural windows. Besides the
// methods above they run SnapKV (prune.SnapKV: the votes of the context's
// last Observe rows, pooled, plus those rows), TOVA (prune.TOVA, the last
// context row's votes) and, for needles, SnapKV voted by the recall line
// before the value (query-aware: an upper reference no stored memory can
// have). Every context row a method holds counts against B, the budget's
// rows: the sinks and recent rows of the window, SnapKV's observation
// rows, span memory's anchors, zoomed rows and summaries (span memory's
// zoom rows are a layer's, shared by its KV heads: one may hold more than
// B while another holds less; its count is the layer's mean per head).
// With LongConfig.Routers (trained router artifacts, lab/router) they also
// run span memory routed by them (span+trained, span+trained+sum, and
// span+trained+window with a recent window resident), and with
// LongConfig.Oracle span memory zoomed by the teacher's attention mass
// (span+oracle, the ceiling of routing); RouterData builds the
// routers' training examples and distillation windows from one prefill
// of a window (routed.go, distill.go).
//
// # GPU zoom path
//
// RunGPUZoom (gpuzoom.go) decodes span memory twice from one stored
// memory: with its zoomed spans rebuilt on the host
// (SpanReader.ReconstructSpan), and through a gpu.Device, the CPU device in
// CI or the CUDA one: per step and layer the same routing, then
// gpu.Prefetcher.Acquire of the zoomed spans' factor blocks (read through
// store/gpusource), the reconstruct + RoPE kernel into the layer's K and V
// (HND, f32) on the device, a copy of the rebuilt rows back to the host
// attention, Release, and a Prefetch of the zoomed spans and the next
// candidates by score for the coming steps. The f32 kernel is bit-exact
// with the host's reconstruction, so the zoom sets and logits must be
// equal, not close; it reports the zoom's factor bytes per step, the
// bytes the prefetcher moved and its hit rate.
//
// # Through llama.cpp
//
// RunLlamaNeedles (llamacpp.go; linux and darwin, amd64 and arm64) serves
// the same span memory to llama.cpp: a row set chosen once per request
// from the question's queries, loaded at the rows' original positions
// (llamacpp.LoadRows), decoded by llama.cpp and by the lab loop over the
// same rows, beside the lab's per-step span method.
package quality
