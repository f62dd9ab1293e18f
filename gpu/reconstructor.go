package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// ReconstructorOptions configure a Reconstructor.
type ReconstructorOptions struct {
	// BatchJobs is the number of spans per kernel launch (default 32).
	// Each launch waits only for its own spans' copies, so copies of the
	// next batch overlap this batch's kernel.
	BatchJobs int
}

// Reconstructor rebuilds resident spans into a server's KV layout on one
// stream: per batch it encodes the jobs, rotation tables and gates into a
// pinned buffer, copies them to the device, waits for the batch's spans'
// Ready events and launches the fused kernel. Two such buffers alternate,
// so encoding batch k+1 overlaps batch k's copy and kernel. A Reconstructor
// is not safe for concurrent use.
type Reconstructor struct {
	dev    Device
	rope   *reconstruct.RoPE
	stream Stream
	opts   ReconstructorOptions
	slots  [2]auxSlot
	next   int

	afterBatch func() // test hook: runs after each launch is enqueued
}

// auxSlot is one of the two alternating job/table buffers.
type auxSlot struct {
	host HostBuffer
	dev  Buffer
	done Event // recorded after the slot's copy to the device
}

// NewReconstructor makes a reconstructor for keys rotated by rope (nil
// when no target rotates) that enqueues its work on stream.
func NewReconstructor(dev Device, rope *reconstruct.RoPE, stream Stream, opts ReconstructorOptions) (*Reconstructor, error) {
	if opts.BatchJobs == 0 {
		opts.BatchJobs = 32
	}
	if opts.BatchJobs < 1 || opts.BatchJobs > 65535 {
		return nil, fmt.Errorf("%w: reconstructor: batch of %d jobs", ErrInvalidArgument, opts.BatchJobs)
	}
	r := &Reconstructor{dev: dev, rope: rope, stream: stream, opts: opts}
	for i := range r.slots {
		ev, err := dev.NewEvent()
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("reconstructor: %w", err)
		}
		r.slots[i].done = ev
	}
	return r, nil
}

// Output is where a Reconstructor writes: a layout, its data and, for the
// paged kind, its block table (device buffers of the same device).
type Output struct {
	Layout Layout
	Dst    Buffer
	Table  Buffer
}

// Run enqueues the reconstruction of targets, whose spans the caller holds
// (spans[i] is targets[i]'s), into out. Factors is the buffer the spans
// live in (Prefetcher.Arena().Base()). It returns once the work is
// enqueued: release the spans with Release(span, stream) and synchronize
// the stream before reading out.
func (r *Reconstructor) Run(factors Buffer, out Output, targets []Target, spans []*Span) error {
	if len(spans) != len(targets) {
		return fmt.Errorf("%w: reconstruct: %d spans for %d targets", ErrInvalidArgument, len(spans), len(targets))
	}
	for start := 0; start < len(targets); start += r.opts.BatchJobs {
		end := min(start+r.opts.BatchJobs, len(targets))
		if err := r.batch(factors, out, targets[start:end], spans[start:end]); err != nil {
			return err
		}
	}
	return nil
}

// batch enqueues one launch.
func (r *Reconstructor) batch(factors Buffer, out Output, targets []Target, spans []*Span) error {
	aux, jobs, maxRows, maxRank, err := r.encode(out.Layout, targets, spans)
	if err != nil {
		return err
	}
	slot := &r.slots[r.next]
	r.next ^= 1
	if err := slot.done.Synchronize(); err != nil { // its previous copy has read the host buffer
		return err
	}
	if err := r.grow(slot, len(aux)); err != nil {
		return err
	}
	copy(slot.host.Bytes(), aux)
	devAux, err := slot.dev.Sub(0, len(aux))
	if err != nil {
		return err
	}
	if err := r.stream.CopyHtoD(devAux, slot.host.Bytes()[:len(aux)]); err != nil {
		return err
	}
	if err := r.stream.Record(slot.done); err != nil {
		return err
	}
	for _, s := range spans {
		if err := r.stream.Wait(s.Ready); err != nil {
			return err
		}
	}
	devJobs, _ := devAux.Sub(0, jobs*JobSize)
	rot, style := 0, r.styleOf()
	if r.rope != nil {
		rot = r.rope.Rotary()
	}
	return r.stream.Reconstruct(&ReconstructLaunch{
		Layout: out.Layout, Dst: out.Dst, Table: out.Table,
		Factors: factors, Aux: devAux, Jobs: devJobs, NumJobs: jobs,
		MaxRows: maxRows, MaxRank: maxRank, Rotary: rot, Style: style,
	})
}

func (r *Reconstructor) styleOf() format.RoPEStyle {
	if r.rope != nil {
		return r.rope.Config().Style
	}
	return 0
}

// encode lays out a batch's aux bytes: the job records, then each rotated
// target's cos/sin table, then each gated target's gates.
func (r *Reconstructor) encode(lay Layout, targets []Target, spans []*Span) (aux []byte, jobs, maxRows, maxRank int, err error) {
	aux = make([]byte, JobSize*len(targets))
	var table []float32
	tables := map[tableKey]int64{} // targets with the same positions share a table
	for i, t := range targets {
		s := spans[i]
		fl := s.Layout
		if fl.Cols != lay.HeadDim {
			return nil, 0, 0, 0, fmt.Errorf("%w: reconstruct %v: %d columns for head dim %d", ErrInvalidArgument, t.Key, fl.Cols, lay.HeadDim)
		}
		j := Job{Factors: s.Offset(), CosSin: -1, Gates: -1, Rows: int32(fl.Rows), Rank: int32(fl.Rank),
			Head: int32(t.Head), Token: int32(t.Token), DType: fl.DType}
		if t.Head < 0 || t.Head >= lay.Heads || t.Token < 0 || t.Token > lay.Tokens-fl.Rows {
			return nil, 0, 0, 0, fmt.Errorf("%w: reconstruct %v: head %d, tokens [%d, +%d) outside %d heads x %d tokens",
				ErrInvalidArgument, t.Key, t.Head, t.Token, fl.Rows, lay.Heads, lay.Tokens)
		}
		if t.Rotate {
			if r.rope == nil {
				return nil, 0, 0, 0, fmt.Errorf("%w: reconstruct %v: rotation without a RoPE", ErrInvalidArgument, t.Key)
			}
			pos, err := positionsOf(t, fl.Rows)
			if err != nil {
				return nil, 0, 0, 0, err
			}
			k := tableKeyOf(t, fl.Rows)
			if off, ok := tables[k]; ok {
				j.CosSin = off
			} else {
				j.CosSin = int64(len(aux))
				tables[k] = j.CosSin
				table = CosSin(table[:0], r.rope, pos, true)
				aux = appendF32(aux, table)
			}
		}
		if t.Gates != nil {
			if len(t.Gates) != fl.Rank {
				return nil, 0, 0, 0, fmt.Errorf("%w: reconstruct %v: %d gates for rank %d", ErrInvalidArgument, t.Key, len(t.Gates), fl.Rank)
			}
			j.Gates = int64(len(aux))
			aux = appendF32(aux, t.Gates)
		}
		j.put(aux[JobSize*i:])
		maxRows, maxRank = max(maxRows, fl.Rows), max(maxRank, fl.Rank)
	}
	return aux, len(targets), maxRows, maxRank, nil
}

// tableKey identifies a target's positions: the same Positions slice, or
// the same implicit run Token, Token+1, ...
type tableKey struct {
	first *int64
	token int
	rows  int
}

func tableKeyOf(t Target, rows int) tableKey {
	if t.Positions != nil {
		return tableKey{first: &t.Positions[0], rows: rows}
	}
	return tableKey{token: t.Token, rows: rows}
}

func positionsOf(t Target, rows int) ([]int64, error) {
	if t.Positions != nil {
		if len(t.Positions) != rows {
			return nil, fmt.Errorf("%w: reconstruct %v: %d positions for %d rows", ErrInvalidArgument, t.Key, len(t.Positions), rows)
		}
		return t.Positions, nil
	}
	pos := make([]int64, rows)
	for i := range pos {
		pos[i] = int64(t.Token + i)
	}
	return pos, nil
}

func appendF32(b []byte, v []float32) []byte {
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

// grow makes a slot hold n bytes. A device buffer being replaced may still
// be read by a kernel, so the stream is drained first.
func (r *Reconstructor) grow(slot *auxSlot, n int) error {
	if slot.host.Len() >= n {
		return nil
	}
	size := max(poolClass(n), 64<<10)
	if slot.host.Len() > 0 {
		if err := r.stream.Synchronize(); err != nil {
			return err
		}
		if err := errors.Join(r.dev.FreeHost(slot.host), r.dev.Free(slot.dev)); err != nil {
			return err
		}
		slot.host, slot.dev = HostBuffer{}, Buffer{}
	}
	h, err := r.dev.AllocHost(size)
	if err != nil {
		return fmt.Errorf("reconstructor: %w", err)
	}
	d, err := r.dev.Alloc(size)
	if err != nil {
		_ = r.dev.FreeHost(h)
		return fmt.Errorf("reconstructor: %w", err)
	}
	slot.host, slot.dev = h, d
	return nil
}

// Close waits for the stream's work and frees the reconstructor's buffers
// and events (not the stream).
func (r *Reconstructor) Close() error {
	err := r.stream.Synchronize()
	for i := range r.slots {
		s := &r.slots[i]
		if s.host.Len() > 0 {
			err = errors.Join(err, r.dev.FreeHost(s.host), r.dev.Free(s.dev))
		}
		if s.done != nil {
			err = errors.Join(err, s.done.Close())
		}
		*s = auxSlot{}
	}
	return err
}
