// Package tier keeps kvstore packets in an S3-compatible object store, so
// that every server of a deployment finds a document's packet wherever it
// was first computed, and makes a local store.DB a cache of it (Cache).
//
// Packets are content-addressed (the id is BLAKE3 over namespace, model
// fingerprint, adapter and tokens), checksummed and bound to a model
// fingerprint, so the bucket needs no index of its own: a packet's key is
// derived from what a reader already knows.
//
// # Objects
//
//	<prefix>/<ns>/<model>/<id>/header            the tier header (below), written last
//	<prefix>/<ns>/<model>/<id>/<content>/000000  payload part 0
//	<prefix>/<ns>/<model>/<id>/<content>/000001  payload part 1 ...
//
//	ns       32 hex digits: BLAKE3("kvstore.tier.ns\x00" + namespace), first 16 bytes
//	model    64 hex digits: the model spec's fingerprint (format.Fingerprint)
//	id       64 hex digits: the packet id (format.PacketID)
//	content  32 hex digits: BLAKE3 of the payload, first 16 bytes
//
// The payload is what store.Put is given, K then V of each layer in
// order, each [kv_heads][tokens][head_dim] of the model's dtype (keys at
// the header's base position), cut into parts of PartSize bytes (default
// 4 MiB; the last part holds the rest):
//
//	payload  | L0 K | L0 V | L1 K | L1 V | ... | L(n-1) V |
//	parts    |  part 0  |  part 1  |  part 2  | ... | last |
//
// Every object is written with a conditional create (If-None-Match: *),
// so no object is ever overwritten: parts first, in parallel, then the
// header, so a header only names parts that exist. Two writers of one
// packet converge: the first header stays (HTTP 412 for the other). Their
// parts never mix, because parts live under the content they belong to; a
// loser with other bytes removes its parts, and one with the same bytes
// finds its parts written already (412 again, and the same bytes by
// construction).
//
// # Header object
//
//	offset  size  field
//	0       4     magic "KVTH"
//	4       2     version, little endian (1)
//	6       2     zero
//	8       4     body length B
//	12      4     CRC32C (Castagnoli) of the body
//	16      B     body:
//	                u32 len, namespace
//	                u32 len, model spec (format.EncodeModelSpec: framed, its own CRC)
//	                u32 len, adapter id
//	                u32 header tokens, u32 trailer tokens, u64 base position
//	                u32 n, n x u32 token ids
//	                u8 codec (format.Codec), u32 len, codec options (JSON of codec.Options)
//	                u64 chunk length (bytes of one layer's K, or V)
//	                u32 part size
//	                16 content
//	                u32 parts, parts x u32 CRC32C of each part
//
// All integers are little endian. A reader checks the frame and CRC, the
// fields' bounds, the chunk length against the model and tokens, the part
// count against the payload, and that the id computed from the header's
// fields, its model's fingerprint and its namespace are those of the key
// it was read from (Header.Matches); then each part's length and CRC32C.
// docs/format.md holds the same layout.
//
// # Namespaces
//
// Every request made for a namespace names a key under that namespace's
// prefix (or lists under it): no call lists the bucket, or another
// namespace's prefix, so a server whose credentials a bucket policy
// confines to one prefix works, and Options.NamespaceCredentials gives
// each namespace its own.
//
// # Faults
//
// Each request attempt is bounded by Options.RequestTimeout. Idempotent
// requests (GET, HEAD, LIST, and the conditional PUTs, whose repeat meets
// 412 and is then checked) are tried Options.Attempts times with
// exponential backoff on transport errors, 5xx, 429 and bad bytes (short
// bodies, CRC mismatches). What remains is ErrUnavailable (the tier
// failing), ErrCorruption (the bytes kept failing their checks) or
// ErrNotFound; no unverified byte is returned or stored.
//
// # Write-through
//
// Cache.Put writes through synchronously (the tier, then the local store)
// or, with Cache.Queue, asynchronously from a durable local spool (Queue:
// one fsynced file per packet, its layout drawn on Queue) that survives a
// crash and a restart and is drained by Queue.Run or Queue.Drain.
//
// Not yet: pruned packets (store.Packet.Keep), garbage collection of parts
// a crashed writer left without a header, and the CLI verbs (which will
// call Tier.Ping, Push, Fetch, List, Cache and Queue).
package tier
