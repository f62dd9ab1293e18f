// Package adapter holds KV Packet adapters: the trained soft tokens that
// make independently prefilled packets read like one context. An adapter is
// a header of N_h and a trailer of N_t rows at the model's input-embedding
// layer; a document is prefilled alone from position 0 as
// [header; document; trailer] (Prefill), so its packet holds
// N_h + L + N_t ordinary cache rows (store.Packet.HeaderTokens and
// TrailerTokens), which Assemble, pruning, codecs and span memory treat
// like any other row. With HideHeader the header is a prefill-only
// context: the packet keeps only the document's and trailer's rows
// (HeaderTokens 0), so the question never attends to the header
// (docs/quality.md, "KV Packet adapters", says why). InitToken starts a
// hidden header from one token's embedding; InitText makes it a text, one
// row per token, so every document is prefilled after the same text.
//
// # Models
//
// An adapter works with any model through the Model interface: the width
// of its input embeddings, the token embeddings themselves
// (AppendEmbeddings) and their column statistics (EmbeddingStats, which
// ColumnStats computes from the matrix; Init draws from them), the RoPE it
// applies to keys, and PrefillEmbeddings: run these input-embedding rows
// as a new sequence from position 0 and return every layer's keys and
// values. Two implementations ship: *llama.Model of lab/llama (the pure-Go
// reference) and llamacpp.AdapterModel (a llama.cpp context's sequence,
// prefilled with llama_batch.embd and read back from its state).
// examples/adapterpacket makes the same packet through both.
//
// Prefill returns a KV, model-neutral: per layer, K and V float32 laid out
// [KV heads][rows][head dim] as store.Layer holds them (Packet and
// CachePacket only convert them to the spec's dtype), keys rotated for
// positions 0, 1, ... A hidden header is prefilled and then dropped here,
// not by the model: its rows are cut out and the remaining keys re-rotated
// by -N_h with the model's RoPE (reconstruct.ShiftF32, the rotation
// store.Assemble applies), in float32 before any conversion. Model's
// methods use only built-in and engine types, so a model package need not
// import this one (lab/llama cannot: the store's tests import it).
//
// An adapter is kept in a store as an artifact (store.PutArtifact) named
// store.AdapterArtifact(id) = "adapter/<id>", bound to the model
// fingerprint of the packets made with it; store.Put refuses a packet
// naming an adapter id the store does not hold for its model. The id is
// part of every packet id (format.ComputePacketID), so packets of two
// adapters never collide. ID gives a content id; any other name works.
//
// # Artifact bytes
//
// The artifact's data is the adapter's safetensors file, the same bytes
// Encode writes and the reference code's adapters convert to (see
// format/safetensors, adapter.go), dtype F32:
//
//	+----------+--------------------------------------------+------------------------+
//	| N: u64LE | JSON header, N bytes:                      | header  [N_h][hidden]  |
//	|          |  {"__metadata__": {"train_config": "...", |   f32 LE, row major    |
//	|          |    "kvstore_hide_header": "true"},         |                        |
//	|          |   "header":  {F32, [N_h, hidden], ...},    | trailer [N_t][hidden]  |
//	|          |   "trailer": {F32, [N_t, hidden], ...}}    |   f32 LE, row major    |
//	+----------+--------------------------------------------+------------------------+
//
// stored with store.ArtifactMeta{DType: invalid (opaque bytes), Note:
// "kv-packet-adapter/1 safetensors"}. Training lives in package
// lab/train.
package adapter
