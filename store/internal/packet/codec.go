package packet

import (
	"fmt"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// encodeChunks returns the packet to write (d itself when it is stored raw,
// else a copy whose layers hold the encoded chunks) and its extent layout
// (the package comment, Chunk codecs).
func encodeChunks(d *Desc, chunkLen uint64) (*Desc, bloblog.Layout, error) {
	chunks := d.Chunks() // a pruned packet's positions chunk last, always raw
	if d.Codec == format.CodecRaw && d.Kept == 0 {
		lay, err := bloblog.NewLayout(chunks, chunkLen)
		return d, lay, err
	}
	if d.Codec == format.CodecRaw {
		lay, err := newEncodedLayout(d, chunkLen, make([]format.Codec, chunks))
		return d, lay, err
	}
	jobs, err := encodeJobs(d)
	if err != nil {
		return nil, bloblog.Layout{}, err
	}
	// The low-rank codec factors keys un-rotated, by the RoPE they were
	// stored with: the model's, whatever CodecOptions.RoPE says.
	opts, rope := d.CodecOptions, d.Model.RoPE
	opts.RoPE = &rope
	if err := codec.EncodeParallel(jobs, opts, 0); err != nil {
		return nil, bloblog.Layout{}, fmt.Errorf("%w: packet: %v", ErrInvalidArgument, err)
	}
	q := *d
	q.Layers = make([]Layer, len(d.Layers))
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

// checkCodec accepts d's codec and options: a known codec, valid options,
// and a float dtype for any codec but raw.
func (d *Desc) checkCodec() error {
	switch {
	case d.Codec == format.CodecRaw:
		return nil
	case !d.Codec.Valid():
		return fmt.Errorf("%w: packet: unknown codec %v", ErrInvalidArgument, d.Codec)
	case !d.Model.DType.Float():
		return fmt.Errorf("%w: packet: codec %v needs a float dtype, model stores %v", ErrInvalidArgument, d.Codec, d.Model.DType)
	}
	o := d.CodecOptions
	if err := o.EnsureDefaults().Validate(); err != nil {
		return fmt.Errorf("packet: %w", err)
	}
	return nil
}

// encodeJobs describes d's K|V chunks (codec checked) for the encoder: of
// the kept rows when d is compacted.
func encodeJobs(d *Desc) ([]codec.Job, error) {
	if err := d.checkCodec(); err != nil {
		return nil, err
	}
	jobs := make([]codec.Job, 2*len(d.Layers))
	for i := range jobs {
		kind := format.ChunkK
		if i%2 == 1 {
			kind = format.ChunkV
		}
		cd := codec.Desc{Kind: kind, DType: d.Model.DType, Heads: d.Model.KVHeads, Tokens: d.Rows(), HeadDim: d.Model.HeadDim}
		jobs[i] = codec.Job{Codec: d.Codec, Desc: cd, Src: d.Chunk(i)}
	}
	return jobs, nil
}

// newEncodedLayout places q's chunks, whatever their lengths.
func newEncodedLayout(q *Desc, raw uint64, codecs []format.Codec) (bloblog.Layout, error) {
	lens := make([]uint64, len(codecs))
	for i := range lens {
		lens[i] = uint64(len(q.Chunk(i)))
	}
	return bloblog.NewEncodedLayout(lens, raw, codecs)
}
