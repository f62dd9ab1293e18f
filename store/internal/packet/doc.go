// Package packet is a packet as Put stores it, from the caller's tensors
// to the bytes of its extent: Desc (the store's Packet, field for field)
// checked against its spec (Check), its keep-set applied (Compacted), its
// keys rotated to local positions (Normalized), its chunks encoded and laid
// out with room for its put record (Encode), and the extent written at the
// end of a blob file, led by that record (Write). It takes the packet, its
// id and fingerprint, the record sequence and the active blob file; it
// knows nothing of the DB, which admits the Put, makes room, syncs the file
// and commits what Write returns. It also writes the tombstone extents of
// a Delete or an eviction, one per packet in one write (WriteTombstones;
// format/tombstone.go draws the record) and adds to a catalog batch the
// keys that catalogue a put or tombstone-backed deletes (AddPut,
// AddDeletes: header and index entry, the blob file records
// of store/internal/catalog, the next-blob and next-record sequences),
// reading blob file records through the Records function it is given.
//
// # Extent
//
// The extent is drawn in store/doc.go and format/layout.go: the put record
// (format/put_record.go) in the first ChunkAlignment-rounded bytes, then
// one packet's chunks, layer-major, K then V, each ChunkAlignment aligned,
// zero padding, and the 64-byte trailer. Its length is known before it is
// written, so that room can be made for it: the put record's length does
// not depend on the CRCs, offsets and lengths it holds, and a header placed
// at a stand-in position measures it (Encode); the same header, placed at
// the extent's real position, leads the extent (Write).
//
// # Chunk codecs
//
// A Desc whose Codec is not raw has every chunk encoded, one chunk per
// goroutine (codec.EncodeParallel); a chunk whose encoding is not smaller
// is kept raw. The extent then holds chunks of different lengths, each
// starting at the previous one's end rounded up to format.ChunkAlignment;
// each ChunkDesc records its Codec, its stored Length and its RawLength,
// and its CRC32C covers the stored (encoded) bytes, so verification never
// decodes.
//
// Reads (store/internal/view, store/internal/assemble): View.Chunk returns
// the stored bytes; View.Layer decodes a compressed chunk (after its CRC is
// verified) into a buffer the view owns and keeps until Release, so
// compressed chunks are not zero-copy. Assemble decodes each compressed
// chunk on the worker placing it, into that worker's scratch of one
// chunk's decoded size (one (layer, K|V) of one packet, never the packet),
// then rotates and places its rows as for a mapped raw chunk; a contiguous
// assembly of one packet decodes straight into the destination and rotates
// there, with no scratch at all.
//
// Int8 and int4 are lossy: keys are quantized as stored, post-RoPE at local
// positions 0..n-1, per channel in groups of CodecOptions.GroupSize tokens;
// values per token. Assemble's rotation to the target positions is applied
// to the decoded keys.
//
// # Pruned packets
//
// A Desc with a keep-set (Keep) is stored compacted: each layer's K and V
// chunk holds only the kept rows, [kv_heads][k][head_dim] with k rows per
// (layer, KV head) in position order, and one more chunk after the last
// layer's V marks the kept local positions in a bitmap of
// n = ceil(Tokens/8) bytes per (layer, KV head) (format/positions.go):
//
//	chunk 2*layers (kind positions, dtype u8, always raw):
//	| (layer 0, head 0): n bytes | (0, 1) | ... | (layers-1, kv_heads-1) |
//	position t kept <=> bit t%8 (LSB first) of byte t/8 is set
//
// Each bitmap has exactly k bits set, and none at or beyond Tokens (the
// last byte's padding bits are zero). It costs Tokens/8 bytes per (layer,
// KV head) whatever k is. The header says KeptTokens = k
// (format.PacketHeader.Pruned). Keys stay
// post-RoPE at their original local positions t (they are not
// renumbered), so placing one at offset o rotates it by o like every other
// key: the shift is uniform although the positions are ragged. The chunk
// codec applies to the compacted K|V chunks as to whole ones, over k rows
// (a lossy codec's groups are taken over the kept rows). The low-rank
// codec un-rotates keys at rows 0..k-1 before factoring them, not at their
// kept positions: its decoding rotates them back the same way, so it stays
// correct, but the matrix factored is not the pre-RoPE keys and compresses
// less well than a whole packet's. The packet keeps
// its document's id; the positions chunk has a CRC32C like every chunk, so
// Verify, Compact, GC and eviction treat a pruned packet like any other.
//
// Reads: View.Layer returns the compacted tensors; View.Keep returns the
// kept positions (CRC-verified, then checked: a bad bitmap is ErrCorruption);
// Assemble places k rows per head and Assembly.Positions maps them to
// absolute positions (store/assemble_prune.go).
package packet

import "github.com/kvstore/kvstore/format"

// The errors are format's, so that errors.Is works with the store's names
// for them too.
var ErrInvalidArgument = format.ErrInvalidArgument
