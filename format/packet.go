package format

// PacketDesc describes one packet's rows as a writer hands them over: what
// every in-memory form of a packet carries besides its tensors. The
// store's Packet (store.Put's argument), the packet the store encodes
// (store/internal/packet) and the S3 tier's header object (tier.Header)
// embed it; PacketHeader is the catalog's record of a stored packet,
// whose fields it derives from these.
//
// The codec's tuning (codec.Options) is not here because package codec
// imports format: each of those types carries CodecOptions beside it.
type PacketDesc struct {
	// Namespace scopes the packet's id (CheckNamespace).
	Namespace string
	// Model is the spec the rows were computed with; its fingerprint
	// keys the packet.
	Model *ModelSpec
	// AdapterID names the KV Packet adapter whose soft tokens are the
	// header and trailer rows; "" for a packet without adapter rows.
	AdapterID string
	// Rows are tokens: HeaderTokens adapter rows, then one row per
	// TokenIDs entry (the document's tokens), then TrailerTokens adapter
	// rows; at least one in all (Tokens).
	HeaderTokens  int
	TrailerTokens int
	TokenIDs      []uint32
	// BasePosition (>= 0) is the position of the keys' first row. The
	// store keeps keys at local positions 0..Tokens()-1: keys given at
	// another base are rotated by -BasePosition before they are stored,
	// and the header records the base.
	BasePosition int
	// Codec is how each chunk is stored: raw (the zero value),
	// shuffle-zstd (lossless), int8 or int4 (lossy group quantization of
	// keys as stored: post-RoPE at local positions), or low rank (lossy
	// truncated SVD per KV head, keys un-rotated first with the model's
	// RoPE). A chunk that the codec would not make smaller is stored raw;
	// the header records each chunk's codec.
	Codec Codec
}

// Tokens is the number of KV rows: HeaderTokens + len(TokenIDs) +
// TrailerTokens.
func (d *PacketDesc) Tokens() int { return d.HeaderTokens + len(d.TokenIDs) + d.TrailerTokens }
