// Package llamacpp makes kvstore the persistent, position-free KV memory
// of llama.cpp: a purego binding (no cgo; CGO_ENABLED=0 works) of the part
// of libllama a KV store needs, and Save/Load of one sequence's cells as
// store packets.
//
// # Library
//
// Open loads libllama from a directory (Options.LibDir or
// $KVSTORE_LLAMA_LIB): the bins/linux-x64 folder of the npm package
// @node-llama-cpp/linux-x64@3.22.1, which scripts/install-libllama.sh
// installs. The binding mirrors the structs it passes by value
// (llama_model_params 80 bytes, llama_context_params 160, llama_batch 56)
// from include/llama.h of the llama.cpp source that package was built from
// (v0.5.0); their sizes and the offsets of the fields it sets are
// compile-time assertions (abi.go), and Open refuses a library whose
// llama_version() is not 0.5.0 (ErrABI). A missing library is ErrNoLibrary.
// Nothing exits the process; llama.cpp's log goes to Options.Log, or
// nowhere (the last warnings are kept to explain a failed call).
//
// # Save and Load
//
// Save, SaveAdapter and Load take the request's context.Context first and
// pass it to the store's Put and Assemble, which stop at its cancellation
// (ctx.Err() wrapped); the libllama calls themselves cannot be
// interrupted.
//
// Save exports a sequence (llama_state_seq_get_data, layout in state.go),
// turns its token-major K rows and its transposed V (v_trans = 1, flash
// attention off) or V rows into a packet's [kv_heads][tokens][head_dim]
// chunks and Puts it; Put rotates the keys from the cells' positions back
// to local positions 0..n-1. Load builds a state of the assembled cells
// and runs store.Assemble straight into its K and V parts
// (store.LayoutPaged with one block for K and for untransposed V,
// store.LayoutTransposedV for transposed V): no full-size intermediate
// copy. It then imports the state (llama_state_seq_set_data). On any
// failure the sequence is left empty. Packets are bound to the GGUF file
// through Model.Spec (gguf.File.Spec: shape, RoPE, a hash of every
// tensor), so packets of another model are store.ErrModelMismatch.
//
// # Adapter packets
//
// AdapterModel is a context's sequence as an adapter.Model, so that the
// adapter package's generic path (adapter.Init, InitToken, Prefill,
// Packet) runs on llama.cpp: its input embeddings are the GGUF's
// token_embd.weight (Model.TokenEmbeddings, since libllama 0.5.0 has no
// token-embedding getter), its prefill empties the sequence, decodes the
// rows from position 0 as input embeddings (llama_batch.embd, in batches
// of ContextOptions.Batch) and reads the cells back from the sequence's
// state as Save does, in float32; its RoPE is the GGUF's. A hidden
// header is dropped and the keys re-rotated by package adapter.
// SaveAdapter is adapter.Packet through an AdapterModel, then Put.
// TestSaveAdapter and TestAdapterModel hold the KV, and the logits of an
// assembled request, against lab/llama's adapter path.
//
// What is not covered: models whose cells carry an extension (M-RoPE),
// recurrent or SWA caches, per-layer KV head counts, quantized cache types,
// more than one stream holding the sequence, pruned packets (a llama.cpp
// cell has one position for all layers and heads).
//
// # Rows at any positions, and span memory
//
// LoadRows makes a sequence hold exactly the rows given (Rows: positions
// strictly ascending, gaps allowed, per layer [kv_heads][rows][head_dim]
// float32, keys rotated for their positions); ReadRows reads a sequence's
// cells back the same way. Attention reads a cell's position only to mask
// it, so gap positions are simply not attended; llama.cpp decodes only at
// the last position + 1, so a caller continuing at the context's length n
// loads a row at n-1.
//
// A SpanReader's rows served to llama.cpp: SpanRows rebuilds resident rows
// and reconstructed spans at their original positions (Meta().BasePosition
// + t). A cell is one row of every layer and KV head, so the spans are
// chosen once per request: RequestSpans takes one span set for all
// (layer, KV head) groups (a span's best score over the groups), and
// every cell counts as a row of every group. GroupSpans chooses per group,
// and SpanGroupRows loads a different row set per group as cells whose
// positions are labels (n-C .. n-1 for C cells per group; the keys carry
// their own positions): exact attention, but such a sequence's positions
// do not name its tokens. Either way the choice is made before decoding
// and kept: the lab's decode loop (lab/quality) re-routes at every token.
// docs/quality.md, "Span memory through llama.cpp", measures both.
//
// # Traps (llama.cpp v0.5.0)
//
// llama_memory_seq_add is lazy: positions change at once, key bytes at the
// next decode, so Save refuses a sequence Shifted and not decoded since. A
// truncated state makes set_data fail yet leave cells restored: SetState
// clears the sequence on failure. Contexts are created with a unified
// cache (one stream), so seq_cp shares cells instead of replacing them.
//
// # Platforms
//
// The binding's struct layouts are those of a 64-bit llama.h, and it loads
// the library with dlopen: it builds on linux and darwin, amd64 and arm64
// (tested on linux/amd64, the npm package's platform). Elsewhere the package
// holds only this comment.
package llamacpp
