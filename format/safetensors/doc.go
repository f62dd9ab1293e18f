// Package safetensors reads and writes safetensors files, the tensor
// container of the Python ecosystem (huggingface/safetensors), and maps KV
// Packet caches onto them. It is bytes <-> values only: no I/O beyond an
// io.ReaderAt, no store.
//
// # File layout
//
//	+----------------+---------------------------+------------------------------+
//	| N: u64 LE      | header: N bytes of JSON   | byte buffer                  |
//	|                | (UTF-8, '{' first, padded |  tensor data, concatenated,  |
//	|                |  with spaces)             |  offsets relative to its 0   |
//	+----------------+---------------------------+------------------------------+
//	0                8                           8+N                      file end
//
// The header is one JSON object:
//
//	{"__metadata__": {"key": "value", ...},          optional, strings only
//	 "name": {"dtype": "BF16", "shape": [2, 3],
//	          "data_offsets": [begin, end]}, ...}
//
// Decode validates the way the upstream Rust crate does, and a bit more:
// N at most MaxHeaderSize (16 MiB; upstream allows 100 MB) and within the
// input; at most MaxTensors entries, MaxMetadataEntries metadata keys (no
// key twice), MaxRank dimensions and two data_offsets, counted while
// parsing; valid UTF-8 JSON that starts with '{' and has nothing but
// spaces after it; no duplicate names (upstream's serde map would keep one
// silently); no unknown or repeated fields in a tensor entry; integers
// only where numbers go; known dtypes only; offsets, sorted,
// contiguous from 0 and covering the buffer exactly; each tensor's length
// equal to the product of its shape times its dtype size. All arithmetic
// is checked for overflow, and a file that claims a huge shape fails
// before anything of that size is allocated or read.
//
// The header is parsed token by token straight from its bytes (scan.go),
// never into generic JSON values: an array is refused at the first element
// past its limit and an unknown field at its name, so a header costs at
// most 4x MaxHeaderSize in all, its own bytes included, whatever it
// claims (TestDecodeHostileHeadersBoundedMemory). Errors wrap
// format.ErrCorruption; Encode's argument errors wrap
// format.ErrInvalidArgument.
//
// # KV packets
//
// EncodeKV and DecodeKV (kv.go) map a packet's cache onto the layout the
// KV Packet reference code keeps: one tensor "kv" of shape
// [2, L, 1, H, S, D] (K then V; batch 1) in the model's dtype, plus
// "position_ids" [1, S] int64, with the model spec and the packet's
// identity in __metadata__ (keys in kv.go).
//
// # KV Packet adapters
//
// EncodeAdapter and DecodeAdapter (adapter.go) read and write the file the
// reference code saves per model: tensors "header" [N_h, hidden] and
// "trailer" [N_t, hidden] (F32 or BF16; F16 and a leading batch dimension
// of 1 accepted on import) and the training config as the metadata string
// "train_config".
package safetensors
