package quality

import (
	"bytes"
	"fmt"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
)

// Attention sinks at packet starts.
//
// A document prefilled alone from position 0 has its first token where a
// text's first token (after BOS, in training) always was: the model makes
// such a row an attention sink, a key every later query puts weight on.
// Assembled, a request of k packets has k such rows besides the BOS row,
// where the full recompute has one sink (the BOS) and ordinary tokens at
// the documents' starts. MultiDocSinks measures it: the attention mass the
// question's and value's queries put on the BOS row, on every packet's
// first row (summed over packets) and on the rest, per layer, for the full
// recompute, the plain packets and the no-training controls of a hidden
// one-row header (each document prefilled after a BOS, the BOS's row
// dropped or kept).

// Sink layouts of MultiDocSinks, in report order.
const (
	SinkFull       = "full recompute"
	SinkPackets    = "packets"
	SinkBOSHidden  = "BOS before each document, dropped"
	SinkBOSVisible = "BOS before each document, kept"
)

// SinkMass is one layout's attention mass per layer, each the mean over
// requests, heads and the continuation's queries.
type SinkMass struct {
	Method string
	// BOS is the mass on the request's BOS row (row 0). Starts is the mass
	// on the documents' first rows, summed over documents (with the BOS
	// kept, a packet's first row is its BOS; the next row is then counted
	// in Second); Second the same for the documents' second rows. Docs is
	// the mass on all the documents' rows (Starts and Second included);
	// the rest (1 - BOS - Docs) is on the question and value read so far.
	// Value is the mass on the needle's value bytes in its document (the
	// rows a recall reads). Adapter is the mass on the packets' visible
	// adapter rows (header and trailer; the BOS rows when kept), summed
	// over packets; they are counted in Docs too.
	BOS, Starts, Second, Docs, Value, Adapter []float64
}

// MultiDocSinks measures SinkMass for each layout over reqs on m: the
// full recompute, plain packets, the two BOS controls, then packets
// prefilled with each of adapters (named "adapter NAME").
func MultiDocSinks(m *llama.Model, reqs []*MultiDocRequest, adapters []MultiDocAdapter) ([]SinkMass, error) {
	if m == nil || len(reqs) == 0 {
		return nil, fmt.Errorf("%w: quality: sinks: model %v, %d requests", format.ErrInvalidArgument, m != nil, len(reqs))
	}
	hidden, err := adapter.InitToken(m, 1, 0, GoBOS)
	if err != nil {
		return nil, err
	}
	visible := *hidden
	visible.HideHeader = false
	names := []string{SinkFull, SinkPackets, SinkBOSHidden, SinkBOSVisible}
	layouts := []*adapter.Adapter{nil, nil, hidden, &visible} // full recompute first, then packets
	for _, a := range adapters {
		names, layouts = append(names, "adapter "+a.Name), append(layouts, a.Adapter)
	}
	out := make([]SinkMass, len(names))
	for i, n := range names {
		out[i] = SinkMass{Method: n, BOS: make([]float64, m.Layers), Starts: make([]float64, m.Layers), Second: make([]float64, m.Layers),
			Docs: make([]float64, m.Layers), Value: make([]float64, m.Layers), Adapter: make([]float64, m.Layers)}
	}
	for ri, r := range reqs {
		caches, starts, err := sinkLayouts(m, r, layouts[1:])
		if err != nil {
			return nil, fmt.Errorf("quality: sinks, request %d: %w", ri, err)
		}
		at := bytes.Index(tokenBytes(r.Docs[r.Needle]), []byte(defLine(r.Name, r.Value)))
		if at < 0 {
			return nil, fmt.Errorf("%w: quality: sinks, request %d: no definition in document %d", format.ErrInvalidArgument, ri, r.Needle)
		}
		at += len(defLine(r.Name, "")) - 2 // the value's first byte
		for i, c := range caches {
			lead := layouts[i].StoredHeaderRows()
			value := starts[i][r.Needle] + lead + at
			var rows []int // the visible adapter rows
			for d, st := range starts[i] {
				for j := range lead {
					rows = append(rows, st+j)
				}
				if a := layouts[i]; a != nil {
					for j := range a.TrailerRows() {
						rows = append(rows, st+lead+len(r.Docs[d])+j)
					}
				}
			}
			n := c.Len()
			res, err := m.Forward(r.Continuation(), int64(n), c, llama.ForwardOptions{Attention: true})
			if err != nil {
				return nil, fmt.Errorf("quality: sinks, request %d, %s: %w", ri, names[i], err)
			}
			addSinkMass(&out[i], res.Attention, starts[i], rows, value, len(r.Value), n, float64(len(reqs)))
		}
	}
	return out, nil
}

// sinkLayouts returns the full recompute's cache, then the assembled
// packets prefilled with each of as (nil: plain), and each cache's
// documents' first rows.
func sinkLayouts(m *llama.Model, r *MultiDocRequest, as []*adapter.Adapter) ([]*llama.Cache, [][]int, error) {
	ctx := r.Context()
	full, err := m.Forward(ctx, 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, nil, err
	}
	var fullStarts []int
	at := 1
	for _, d := range r.Docs {
		fullStarts = append(fullStarts, at)
		at += len(d)
	}
	caches, starts := []*llama.Cache{full.Cache}, [][]int{fullStarts}
	bos, err := m.Forward(ctx[:1], 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, nil, err
	}
	for _, a := range as {
		ps := make([]*llama.Cache, len(r.Docs))
		var st []int
		at := 1
		for d, doc := range r.Docs {
			if a == nil {
				res, err := m.Forward(doc, 0, nil, llama.ForwardOptions{LastOnly: true})
				if err != nil {
					return nil, nil, err
				}
				ps[d] = res.Cache
			} else {
				kv, err := a.Prefill(m, doc)
				if err != nil {
					return nil, nil, err
				}
				if ps[d], err = m.CacheOf(kv.K, kv.V); err != nil {
					return nil, nil, err
				}
			}
			st = append(st, at)
			at += ps[d].Len()
		}
		c, err := Assemble(m, bos.Cache, ps)
		if err != nil {
			return nil, nil, err
		}
		caches, starts = append(caches, c), append(starts, st)
	}
	return caches, starts, nil
}

// addSinkMass adds att's mass (Attention[layer][head][query][key] of the
// continuation's queries over n context rows and themselves) on row 0,
// the rows starts (and the rows after them), the adapter rows, the
// value's rows value to value+vn-1 and the context rows 1..n-1 to s, each
// divided by heads, queries and w.
func addSinkMass(s *SinkMass, att [][][][]float32, starts, adapterRows []int, value, vn, n int, w float64) {
	for l, heads := range att {
		var bos, first, second, docs, val, ad, cnt float64
		for _, qs := range heads {
			for _, row := range qs {
				bos += float64(row[0])
				for _, p := range starts {
					first += float64(row[p])
					second += float64(row[p+1])
				}
				for _, v := range row[1:n] {
					docs += float64(v)
				}
				for _, v := range row[value : value+vn] {
					val += float64(v)
				}
				for _, p := range adapterRows {
					ad += float64(row[p])
				}
				cnt++
			}
		}
		s.BOS[l] += bos / cnt / w
		s.Starts[l] += first / cnt / w
		s.Second[l] += second / cnt / w
		s.Docs[l] += docs / cnt / w
		s.Value[l] += val / cnt / w
		s.Adapter[l] += ad / cnt / w
	}
}

// tokenBytes is a byte-level model's tokens as bytes.
func tokenBytes(toks []int) []byte {
	b := make([]byte, len(toks))
	for i, t := range toks {
		b[i] = byte(t)
	}
	return b
}
