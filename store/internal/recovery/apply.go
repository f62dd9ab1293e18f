package recovery

import (
	"cmp"
	"maps"
	"slices"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// entryState is a packet's catalog entry as the reconciliation goes: from
// the catalog (rec nil) or from a tail record.
type entryState struct {
	h   *format.PacketHeader // nil: deleted
	rec *tailRecord
}

// repoint points a catalogued packet whose blob file is gone from disk at
// a copy of its extent found in a file the catalog does not list: what a
// compaction whose batch was lost (with a damaged WAL) leaves, after it
// removed the files it had copied from.
func (p *Plan) repoint() {
	for _, t := range p.stale {
		cur, err := p.current(t.key())
		if err != nil || cur.h == nil || cur.rec != nil || cur.h.ID != t.put.ID {
			continue
		}
		if _, ok := p.s.Disk[cur.h.BlobFile]; ok {
			continue
		}
		p.kill(cur)
		p.state[t.key()] = &entryState{h: t.put, rec: t}
		t.applied = true
		p.records = append(p.records, t)
		p.Report.Repointed++
		p.Report.Stale--
	}
}

// apply plays the records in sequence order over the catalog's packets.
func (p *Plan) apply() {
	p.repoint()
	slices.SortStableFunc(p.records, func(a, b *tailRecord) int { return cmp.Compare(a.seq, b.seq) })
	for _, t := range p.records {
		if t.applied {
			continue // repointed
		}
		cur, err := p.current(t.key())
		if err != nil {
			p.problem("packet of the record at %06d:%d: %v", t.num, t.off, err)
			continue
		}
		switch {
		case t.put != nil && cur.h != nil && cur.rec != nil && cur.rec.seq == t.seq:
			t.duplicate = true // a copy compaction made of the same record
		case t.put != nil:
			if cur.h != nil {
				p.Report.Replaced++
			} else {
				p.Report.Inserted++
			}
			p.kill(cur)
			p.state[t.key()] = &entryState{h: t.put, rec: t}
			t.applied = true
		case cur.h == nil:
			t.applied = true // a delete already in the catalog, or of nothing
		case cur.h.Model != t.tomb.Model:
			p.problem("tombstone at %06d:%d deletes %s for model %s, catalogued for %s",
				t.num, t.off, t.tomb.ID.Short(), t.tomb.Model.Short(), cur.h.Model.Short())
		default:
			p.Report.Deleted++
			p.kill(cur)
			p.state[t.key()] = &entryState{}
			t.applied = true
		}
	}
	p.account()
}

// current is the packet's entry so far: the reconciled one, else the
// catalog's.
func (p *Plan) current(key string) (*entryState, error) {
	if s, ok := p.state[key]; ok {
		return s, nil
	}
	s := &entryState{}
	if p.s.Full {
		return s, nil
	}
	_, err := p.s.Catalog.Get([]byte(key), func(v []byte) (err error) {
		s.h, err = format.DecodeHeader(v)
		return err
	})
	return s, err
}

// kill makes a catalogued packet's extent dead in its file's record; an
// extent found in a tail is accounted for by account.
func (p *Plan) kill(s *entryState) {
	if s.h == nil || s.rec != nil {
		return
	}
	r, ok := p.recs[s.h.BlobFile]
	if !ok {
		p.problem("packet %s: its blob file %06d has no record", s.h.ID.Short(), s.h.BlobFile)
		return
	}
	r.KillExtent(s.h.ExtentLength)
	p.recs[s.h.BlobFile] = r
}

// account extends each file's record over the extents up to its last
// applied record: live for the puts that are their packet's entry at the
// end, dead for the rest (tombstones, replaced and duplicate puts).
func (p *Plan) account() {
	ends := map[uint32]uint64{}
	for _, t := range p.records {
		if t.applied {
			ends[t.num] = max(ends[t.num], t.off+t.n)
		}
	}
	byPos := slices.Clone(p.records)
	slices.SortFunc(byPos, func(a, b *tailRecord) int {
		return cmp.Or(cmp.Compare(a.num, b.num), cmp.Compare(a.off, b.off))
	})
	for _, num := range slices.Sorted(maps.Keys(ends)) {
		r, ok := p.recs[num]
		if !ok {
			r = catalog.BlobFile{Num: num, Size: format.BlobHeaderSize}
			p.Report.NewFiles++
		}
		end := ends[num]
		var counted uint64
		for _, t := range byPos {
			if t.num != num || t.off+t.n > end {
				continue
			}
			r.Extents++
			counted += t.n
			if s := p.state[t.key()]; t.put != nil && s != nil && s.rec == t {
				r.LiveBytes += t.n
				r.LiveExtents++
			} else {
				r.DeadBytes += t.n
			}
		}
		// Extents without a record (or stale) between them are dead.
		r.DeadBytes += end - r.Size - counted
		r.Size = end
		p.recs[num] = r
	}
}
