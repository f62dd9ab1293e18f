// Package bench measures kvstore against its peers — plain files, Pebble,
// Badger and bbolt — on the same synthetic KV-cache packets, in one run, on
// one machine, and models what the measured bandwidths mean for the time to
// first token (TTFT) of an inference server.
//
// A packet here is one document's bf16 KV cache, laid out as kvstore stores
// it: layer-major, keys then values, each [kv_heads][tokens][head_dim]:
//
//	+----------+----------+----------+----------+-----+-------------+-------------+
//	| layer0 K | layer0 V | layer1 K | layer1 V | ... | layer L-1 K | layer L-1 V |
//	+----------+----------+----------+----------+-----+-------------+-------------+
//	 each chunk: kv_heads * tokens * head_dim * 2 bytes
//
// Every store under test implements [Peer]. Plain files write the whole
// packet with one write and read it back with os.ReadFile; the key-value
// stores keep one value per chunk under the key
//
//	+----------------------+------------------+-----------+
//	| hash of id (8, BE)   | layer (2, BE)    | kind (1)  |   kind: 0 = K, 1 = V
//	+----------------------+------------------+-----------+
//
// (a hash, so that packets arrive in random key order, as content-addressed
// ids do).
//
// [Run] drives every operation (Put, Get warm, Get cold, Assemble) over every
// store and returns a [Report] of medians, ratios to plain files, write
// amplification and on-disk size; [Report.WriteTable] and [TTFT] render it.
package bench
