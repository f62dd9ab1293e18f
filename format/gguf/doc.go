// Package gguf reads and writes GGUF, the file format llama.cpp loads models
// from, and derives kvstore's format.ModelSpec from a GGUF's metadata so
// that packets saved from a llama.cpp server are bound to its model file.
//
// # Layout (GGUF version 3, all little endian)
//
//	+--------------------------------------------------------------+
//	| magic "GGUF" (4) | version u32 = 2 or 3                      |
//	| tensor_count u64 | kv_count u64                              |
//	+--------------------------------------------------------------+
//	| kv_count x { key string | value_type u32 | value }           |
//	+--------------------------------------------------------------+
//	| tensor_count x { name string | n_dims u32 | dims u64[n_dims] |
//	|                  type u32 (ggml type) | offset u64 }         |
//	+--------------------------------------------------------------+
//	| zero padding to general.alignment (default 32)               |
//	+--------------------------------------------------------------+
//	| tensor data: each tensor at data start + offset, offsets     |
//	| multiples of the alignment                                   |
//	+--------------------------------------------------------------+
//
//	string = len u64 | len bytes of UTF-8 (not NUL-terminated)
//	value  = u8 | i8 | u16 | i16 | u32 | i32 | f32 | bool (1 byte) |
//	         string | array | u64 | i64 | f64   (value types 0..12)
//	array  = elem_type u32 | count u64 | count x value (no nested arrays
//	         here: llama.cpp writes none, and this reader refuses them)
//
// dims[0] is the innermost (contiguous) dimension: a row-major [out][in]
// matrix has dims {in, out}.
//
// # Untrusted input
//
// Parse and Read treat a file as hostile: every count and length is checked
// against the bytes that remain before anything is allocated for it (an
// element takes at least one byte), against fixed limits (MaxTensors, MaxKV,
// MaxString, MaxDims), every tensor's size is overflow-checked, and
// tensors must lie in order, each at the previous one's end padded to the
// alignment, the last ending inside the file (ggml's own rule: none
// overlap, so a file re-encodes to its own size). Errors wrap
// format.ErrCorruption. The
// fuzz target fuzz.FuzzGGUF checks that and the re-encoding round trip.
package gguf
