package tier

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// MaxPacketBytes bounds the payload a fetch allocates for, so that a
// header from a hostile writer (its CRC is no signature) cannot ask for
// more memory than any real packet needs.
const MaxPacketBytes = 32 << 30

// Header reads and checks packet id's header object: its frame and CRC32C,
// its fields (DecodeHeader), and that it is the header of (ns, fp, id)
// (Header.Matches). A missing packet is ErrNotFound.
func (t *Tier) Header(ctx context.Context, ns string, fp format.Fingerprint, id format.PacketID) (*Header, error) {
	var h *Header
	_, err := t.getSmall(ctx, ns, t.headerKey(ns, fp, id), MaxHeaderBytes, func(b []byte) error {
		d, err := DecodeHeader(b)
		if err != nil {
			return err
		}
		if err := d.Matches(ns, fp, id); err != nil {
			return err
		}
		h = d
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("packet %s in namespace %q: %w", id.Short(), ns, err)
	}
	return h, nil
}

// Fetch reads packet (ns, fp, id) from the tier: the header, checked, then
// every part in parallel, each read straight into its place in one buffer
// and checked against the header's CRC32C (a part that fails is fetched
// again, up to Options.Attempts times). Only a packet whose every byte
// passed is returned, as the store.Packet to give store.Put; its Layers
// alias that buffer. Missing: ErrNotFound; bad bytes: ErrCorruption; the
// tier failing: ErrUnavailable.
func (t *Tier) Fetch(ctx context.Context, ns string, fp format.Fingerprint, id format.PacketID) (*store.Packet, error) {
	h, err := t.Header(ctx, ns, fp, id)
	if err != nil {
		return nil, err
	}
	if h.PayloadLen() > MaxPacketBytes {
		return nil, fmt.Errorf("%w: packet %s: payload of %d bytes exceeds %d", ErrCorruption, id.Short(), h.PayloadLen(), uint64(MaxPacketBytes))
	}
	payload := make([]byte, h.PayloadLen())
	err = t.parallel(ctx, h.Parts(), func(ctx context.Context, i int, _ []byte) error {
		off, n := h.part(i)
		return t.getInto(ctx, ns, t.partKey(ns, fp, id, h.Content, i), payload[off:off+n], func(b []byte) error {
			if c := format.CRC(b); c != h.PartCRCs[i] {
				return fmt.Errorf("%w: part %d (payload bytes %d..%d): CRC32C %08x, header says %08x",
					ErrCorruption, i, off, off+n, c, h.PartCRCs[i])
			}
			return nil
		})
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			// The header names a part that is gone: the packet is damaged,
			// not absent.
			err = fmt.Errorf("%w: part missing: %v", ErrCorruption, err)
		}
		return nil, fmt.Errorf("packet %s in namespace %q: %w", id.Short(), ns, err)
	}
	return h.packet(payload), nil
}

// packet returns the store.Packet that h and its payload describe.
func (h *Header) packet(payload []byte) *store.Packet {
	p := &store.Packet{PacketDesc: h.PacketDesc, CodecOptions: h.CodecOptions}
	n := h.ChunkLen
	for l := range h.Model.Layers {
		k := uint64(2*l) * n
		p.Layers = append(p.Layers, store.Layer{K: payload[k : k+n : k+n], V: payload[k+n : k+2*n : k+2*n]})
	}
	return p
}

// List returns the ids of namespace ns's packets for model fp, in key
// order, up to limit (all when limit <= 0). It lists only under the
// namespace's own prefix. An id is listed once its parts or header exist;
// Header or Fetch says whether it is whole.
func (t *Tier) List(ctx context.Context, ns string, fp format.Fingerprint, limit int) ([]format.PacketID, error) {
	prefix := t.modelPrefix(ns, fp)
	var ids []format.PacketID
	var token *string
	for {
		var out *s3.ListObjectsV2Output
		err := t.retry(ctx, "list "+prefix, func(ctx context.Context) (err error) {
			out, err = t.clientFor(ns).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &t.opts.Bucket,
				Prefix: &prefix, Delimiter: new("/"), ContinuationToken: token})
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, cp := range out.CommonPrefixes {
			if cp.Prefix == nil || len(*cp.Prefix) != len(prefix)+65 {
				continue
			}
			id, err := format.ParsePacketID((*cp.Prefix)[len(prefix) : len(prefix)+64])
			if err != nil {
				continue // not a packet's folder
			}
			ids = append(ids, id)
			if limit > 0 && len(ids) == limit {
				return ids, nil
			}
		}
		if out.IsTruncated == nil || !*out.IsTruncated || out.NextContinuationToken == nil {
			return ids, nil
		}
		token = out.NextContinuationToken
	}
}
