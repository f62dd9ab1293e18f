// Package format turns kvstore's values into bytes and back: dtypes and
// their rounding, CRC32C, the FORMAT file, blob file headers, extent
// trailers, and the catalog values (model specs and packet headers) kept as
// framed FlatBuffers. It does no I/O. docs/format.md is the specification;
// this comment is the map.
//
// # Files of a store
//
//	FORMAT (20 bytes)      "KVSTORE\0" | major u16 | minor u16 | flags u32 = 0 | crc32c of 0..16
//	                       (kept twice: FORMAT and FORMAT.copy, the same bytes)
//	blob header (4096)     "KVBLOB\0\1" | major u16 | minor u16 | file number u32 | crc32c of 0..16 | zeros
//
// An extent holds one packet's chunks in a blob file. It starts and ends on
// Alignment (4 KiB); each chunk starts on ChunkAlignment (64 bytes); the gaps
// are zero; the 64-byte trailer ends the extent:
//
//	ExtentOffset                                           ExtentOffset+ExtentLength
//	| chunk 0 (L0 K) |0..| chunk 1 (L0 V) |0..| ... | chunk 2L-1 |0.....| trailer |
//	|<------------------- payload (trailer's PayloadLen) ------->|
//
//	trailer (64 bytes)     "KVXTRAIL" | packet id (32) | extent offset u64 | payload len u64 |
//	                       payload crc32c u32 | crc32c of bytes 0..60
//
// A chunk is a tensor [kv_heads][rows][head_dim] of the header's dtype,
// stored under its codec (codec draws the encoded layouts). A pruned
// packet (PacketHeader.KeptTokens = k > 0) keeps k rows per (layer, KV
// head), so its K and V chunks are [kv_heads][k][head_dim], and one more
// chunk, 2L, after layer L-1's V, holds the kept local positions as
// bitmaps (kind Positions, dtype U8, always raw):
//
//	| (layer 0, head 0): ceil(Tokens/8) bytes | (0, 1) | ... | (L-1, H-1) |
//	  bit t%8 (LSB first) of byte t/8 is set when position t is kept;
//	  exactly k bits per (layer, head), none at or beyond Tokens
//
// # Catalog values
//
// A catalog value is a record: a 16-byte frame, then a FlatBuffer body.
//
//	0          4          6           8           12                  16
//	| magic    | version  | reserved  | body len  | crc32c of 0..12   | body ...
//	| u32 LE   | u16 LE   | u16 = 0   | u32 LE    | and of the body   |
//
// Magic numbers are four ASCII bytes: "KVPH" packet header, "KVMS" model
// spec; "KVSP" and "KVAR" are reserved for span records and artifacts. Other
// packages frame their own records with RegisterKind, Seal and Unseal.
//
// # Reading untrusted bytes
//
// Decoders check in this order, and stop at the first failure: frame magic,
// body length against the kind's limit and the value's size, CRC32C, frame
// version; then verifyBuffer walks the whole FlatBuffer (every offset,
// vtable, field, string, vector and enum, in bounds and aligned) before any
// generated accessor runs; then the decoded value must pass Validate. Bad
// bytes are ErrCorruption, a newer major version ErrVersion, a value that
// cannot be written ErrInvalidArgument.
//
// The generated FlatBuffers code lives in format/fb, produced by flatc from
// schema/kvstore.fbs (see generate.go); the verifier's tables in verify.go
// must follow the schema, which TestVerifierMatchesSchema checks.
package format
