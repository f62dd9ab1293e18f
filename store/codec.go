package store

import (
	"fmt"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// Chunk codecs in the store.
//
// Put encodes every chunk of a packet whose Codec is not raw, one chunk per
// goroutine (codec.EncodeParallel), and keeps a chunk raw when its encoding
// is not smaller. The extent then holds chunks of different lengths, each
// starting at the previous one's end rounded up to format.ChunkAlignment;
// each ChunkDesc records its Codec, its stored Length and its RawLength,
// and its CRC32C covers the stored (encoded) bytes, so verification never
// decodes.
//
// Reads: View.Chunk returns the stored bytes; View.Layer decodes a
// compressed chunk (after its CRC is verified) into a buffer the view owns
// and keeps until Release, so compressed chunks are not zero-copy. Assemble
// decodes each compressed chunk on the worker placing it, into that
// worker's scratch of one chunk's decoded size (one (layer, K|V) of one
// packet, never the packet), then rotates and places its rows as for a
// mapped raw chunk; a contiguous assembly of one packet decodes straight
// into the destination and rotates there, with no scratch at all.
//
// Int8 and int4 are lossy: keys are quantized as stored, post-RoPE at local
// positions 0..n-1, per channel in groups of CodecOptions.GroupSize tokens;
// values per token. Assemble's rotation to the target positions is applied
// to the decoded keys.

// encodeChunks returns the packet to write (p itself when it is stored raw,
// else a copy whose layers hold the encoded chunks) and its extent layout.
func encodeChunks(p *Packet, chunkLen uint64) (*Packet, bloblog.Layout, error) {
	chunks := p.chunks() // a pruned packet's positions chunk last, always raw
	if p.Codec == format.CodecRaw && p.kept == 0 {
		lay, err := bloblog.NewLayout(chunks, chunkLen)
		return p, lay, err
	}
	if p.Codec == format.CodecRaw {
		lay, err := newEncodedLayout(p, chunkLen, make([]format.Codec, chunks))
		return p, lay, err
	}
	jobs, err := encodeJobs(p)
	if err != nil {
		return nil, bloblog.Layout{}, err
	}
	// The low-rank codec factors keys un-rotated, by the RoPE they were
	// stored with: the model's, whatever CodecOptions.RoPE says.
	opts, rope := p.CodecOptions, p.Model.RoPE
	opts.RoPE = &rope
	if err := codec.EncodeParallel(jobs, opts, 0); err != nil {
		return nil, bloblog.Layout{}, fmt.Errorf("%w: packet: %v", ErrInvalidArgument, err)
	}
	q := *p
	q.Layers = make([]Layer, len(p.Layers))
	codecs := make([]format.Codec, chunks)
	for i := range jobs {
		b, c := jobs[i].Dst, jobs[i].Codec
		if uint64(len(b)) >= chunkLen {
			b, c = jobs[i].Src, format.CodecRaw // not smaller: keep it raw
		}
		codecs[i] = c
		if i%2 == 0 {
			q.Layers[i/2].K = b
		} else {
			q.Layers[i/2].V = b
		}
	}
	lay, err := newEncodedLayout(&q, chunkLen, codecs)
	return &q, lay, err
}

// checkCodec accepts p's codec and options: a known codec, valid options,
// and a float dtype for any codec but raw.
func (p *Packet) checkCodec() error {
	switch {
	case p.Codec == format.CodecRaw:
		return nil
	case !p.Codec.Valid():
		return fmt.Errorf("%w: packet: unknown codec %v", ErrInvalidArgument, p.Codec)
	case !p.Model.DType.Float():
		return fmt.Errorf("%w: packet: codec %v needs a float dtype, model stores %v", ErrInvalidArgument, p.Codec, p.Model.DType)
	}
	o := p.CodecOptions
	if err := o.EnsureDefaults().Validate(); err != nil {
		return fmt.Errorf("packet: %w", err)
	}
	return nil
}

// encodeJobs describes p's K|V chunks (codec checked) for the encoder: of
// the kept rows when p is compacted (pruned.go).
func encodeJobs(p *Packet) ([]codec.Job, error) {
	if err := p.checkCodec(); err != nil {
		return nil, err
	}
	jobs := make([]codec.Job, 2*len(p.Layers))
	for i := range jobs {
		kind := format.ChunkK
		if i%2 == 1 {
			kind = format.ChunkV
		}
		d := codec.Desc{Kind: kind, DType: p.Model.DType, Heads: p.Model.KVHeads, Tokens: p.rows(), HeadDim: p.Model.HeadDim}
		jobs[i] = codec.Job{Codec: p.Codec, Desc: d, Src: p.chunkSource(i)}
	}
	return jobs, nil
}

// newEncodedLayout places q's chunks, whatever their lengths.
func newEncodedLayout(q *Packet, raw uint64, codecs []format.Codec) (bloblog.Layout, error) {
	lens := make([]uint64, len(codecs))
	for i := range lens {
		lens[i] = uint64(len(q.chunkSource(i)))
	}
	return bloblog.NewEncodedLayout(lens, raw, codecs)
}
