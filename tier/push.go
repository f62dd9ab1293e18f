package tier

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// Pushed says what Push did.
type Pushed int

const (
	// Created: this call wrote the packet's header (and its parts).
	Created Pushed = iota
	// Present: the tier already held the packet (found before uploading,
	// or another writer's header won the conditional create). Its bytes
	// may be another writer's: like the local store, the first stays.
	Present
)

// Push writes packet p to the tier unless it is there: its parts first,
// in parallel, each with a conditional create, then its header with a
// conditional create, so that the header, which readers look for, only
// ever names parts that exist, and no object is ever overwritten. Two
// writers of the same packet converge: one header results, and the loser
// removes its own parts when its content differs. p is read, not kept.
//
// Push stores what store.Put would be given: the keys as the caller holds
// them (at BasePosition), the codec and its options, so that a fetch puts
// the same packet locally. A pruned packet (Keep) is ErrInvalidArgument:
// not supported yet.
func (t *Tier) Push(ctx context.Context, p *store.Packet) (format.PacketID, Pushed, error) {
	h, chunks, err := t.describe(p)
	if err != nil {
		return format.PacketID{}, 0, err
	}
	fp := p.Model.Fingerprint()
	id := format.ComputePacketID(p.Namespace, fp, p.AdapterID, p.TokenIDs)
	if _, err := t.Header(ctx, p.Namespace, fp, id); err == nil {
		return id, Present, nil
	} else if !errors.Is(err, ErrNotFound) {
		return id, 0, err
	}
	if err := t.putParts(ctx, h, chunks, fp, id); err != nil {
		return id, 0, err
	}
	b, err := h.Encode()
	if err != nil {
		return id, 0, err
	}
	err = t.putIfAbsent(ctx, p.Namespace, t.headerKey(p.Namespace, fp, id), b)
	if !errors.Is(err, errExists) {
		return id, Created, err
	}
	// Another writer's header won. Ours parts are garbage unless they are
	// the winner's too (the same content).
	won, herr := t.Header(ctx, p.Namespace, fp, id)
	if herr != nil {
		return id, 0, fmt.Errorf("tier: packet %s: header exists but cannot be read: %w", id.Short(), herr)
	}
	if won.Content != h.Content {
		t.deleteParts(ctx, h, fp, id)
	}
	return id, Present, nil
}

// describe checks p and returns its tier header (PartCRCs not yet filled)
// and its chunks in payload order: K then V of each layer.
func (t *Tier) describe(p *store.Packet) (*Header, [][]byte, error) {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: tier push: %s", ErrInvalidArgument, fmt.Sprintf(f, args...))
	}
	switch {
	case p.Model == nil:
		return nil, nil, bad("no model spec")
	case p.Keep != nil:
		return nil, nil, bad("pruned packets (Keep) are not supported by the tier yet")
	case len(p.Layers) != p.Model.Layers:
		return nil, nil, bad("%d layers, model has %d", len(p.Layers), p.Model.Layers)
	case p.HeaderTokens < 0 || p.TrailerTokens < 0 || p.BasePosition < 0 || p.Tokens() == 0:
		return nil, nil, bad("tokens (%d header, %d ids, %d trailer) or base position %d",
			p.HeaderTokens, len(p.TokenIDs), p.TrailerTokens, p.BasePosition)
	}
	if err := p.Model.Validate(); err != nil {
		return nil, nil, err
	}
	m := p.Model
	n := uint64(m.KVHeads) * uint64(p.Tokens()) * uint64(m.HeadDim) * uint64(m.DType.Size())
	chunks := make([][]byte, 0, 2*len(p.Layers))
	for l, layer := range p.Layers {
		if uint64(len(layer.K)) != n || uint64(len(layer.V)) != n {
			return nil, nil, bad("layer %d: K %d bytes, V %d bytes, want %d", l, len(layer.K), len(layer.V), n)
		}
		chunks = append(chunks, layer.K, layer.V)
	}
	h := &Header{
		PacketDesc:   p.PacketDesc,
		CodecOptions: p.CodecOptions,
		ChunkLen:     n,
		PartSize:     uint32(t.opts.PartSize),
		Content:      contentOf(chunks),
	}
	h.PartCRCs = make([]uint32, h.Parts())
	return h, chunks, nil
}

// putParts uploads every part, Options.Parallel at once, filling
// h.PartCRCs. A part that exists already is the same content's (its key
// names the content), so it counts as written.
func (t *Tier) putParts(ctx context.Context, h *Header, chunks [][]byte, fp format.Fingerprint, id format.PacketID) error {
	return t.parallel(ctx, h.Parts(), func(ctx context.Context, i int, buf []byte) error {
		off, n := h.part(i)
		part := gather(buf[:n], chunks, h.ChunkLen, off)
		h.PartCRCs[i] = format.CRC(part)
		err := t.putIfAbsent(ctx, h.Namespace, t.partKey(h.Namespace, fp, id, h.Content, i), part)
		if errors.Is(err, errExists) {
			return nil
		}
		return err
	})
}

// gather copies the payload bytes [off, off+len(dst)) out of chunks, each
// chunkLen bytes, into dst.
func gather(dst []byte, chunks [][]byte, chunkLen, off uint64) []byte {
	for w := 0; w < len(dst); {
		c, in := (off+uint64(w))/chunkLen, (off+uint64(w))%chunkLen
		w += copy(dst[w:], chunks[c][in:])
	}
	return dst
}

// deleteParts removes the parts of content h.Content, best effort: they
// are garbage either way (no header names them).
func (t *Tier) deleteParts(ctx context.Context, h *Header, fp format.Fingerprint, id format.PacketID) {
	for i := range h.Parts() {
		key := t.partKey(h.Namespace, fp, id, h.Content, i)
		t.attempt(ctx, func(ctx context.Context) error {
			_, err := t.clientFor(h.Namespace).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &t.opts.Bucket, Key: &key})
			return err
		})
	}
}

// parallel runs fn for parts 0..n-1 on up to Options.Parallel workers,
// each with its own PartSize buffer, and returns the first error (the
// others are cancelled).
func (t *Tier) parallel(ctx context.Context, n int, fn func(ctx context.Context, i int, buf []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range min(n, t.opts.Parallel) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, t.opts.PartSize)
			for i := range next {
				if err := fn(ctx, i, buf); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return fmt.Errorf("%w: tier: %w", ErrUnavailable, ctx.Err())
	}
	return first
}
