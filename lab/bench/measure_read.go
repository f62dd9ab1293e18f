package bench

import (
	"bytes"
	"fmt"
)

// verify reads every packet back once, untimed, and compares every byte.
func (m *measurer) verify() error {
	for i := range m.nPuts() {
		m.progress("verify %d/%d", i+1, m.nPuts())
		if err := m.peer.Get(uint64(i), m.compare); err != nil {
			return fmt.Errorf("verify packet %d: %w", i, err)
		}
	}
	return nil
}

func (m *measurer) compare(l int, k, v []byte) error {
	wk, wv := m.pk.Layer(l)
	if !bytes.Equal(k, wk) || !bytes.Equal(v, wv) {
		return fmt.Errorf("%w: layer %d read back differs from what was put", errShortRead, l)
	}
	return nil
}

// discard is the Visit of timed reads: the bytes are in the caller's hands,
// which is all a Get promises.
func discard(int, []byte, []byte) error { return nil }

// getWarm times run r's Get of a packet whose pages were just read, and
// the views-only Get where the store has one.
func (m *measurer) getWarm(r int) error {
	id := uint64(r % m.nPuts())
	m.progress("get warm %d/%d", r+1, m.cfg.Runs)
	if err := m.peer.Get(id, discard); err != nil {
		return err
	}
	d, err := timed(func() error { return m.peer.Get(id, discard) })
	if err != nil {
		return err
	}
	m.warm = append(m.warm, d)
	if v, ok := m.peer.(Viewer); ok {
		d, err := timed(func() error { return v.GetViews(id) })
		if err != nil {
			return err
		}
		m.views = append(m.views, d)
	}
	return nil
}

// assembler returns the multi-packet read to time and what it is.
func (m *measurer) assembler() (func([]uint64, Visit) error, string) {
	if a, ok := m.peer.(Assembler); ok {
		return a.Assemble, a.AssembleLabel()
	}
	return m.sequential, fmt.Sprintf("read %d packets, every byte, one Get after another", m.assembleN)
}

func (m *measurer) sequential(ids []uint64, visit Visit) error {
	for _, id := range ids {
		if err := m.peer.Get(id, visit); err != nil {
			return err
		}
	}
	return nil
}

func (m *measurer) assembleIDs() []uint64 {
	ids := make([]uint64, m.assembleN)
	for i := range ids {
		ids[i] = uint64(i)
	}
	return ids
}

// assemble times run r of an Assemble of assembleN packets, warm: the run
// is preceded by an untimed one.
func (m *measurer) assemble(r int) error {
	m.progress("assemble %d/%d", r+1, m.cfg.Runs)
	asm, label := m.assembler()
	m.row.AssembleWhat = label
	if err := asm(m.assembleIDs(), discard); err != nil {
		return err
	}
	d, err := timed(func() error { return asm(m.assembleIDs(), discard) })
	m.asm = append(m.asm, d)
	return err
}

// getCold times run r's Get after the store was closed, its files' pages
// dropped and the store reopened, and counts the bytes the Get read from
// storage. Then the same for the views-only Get, where the store has one.
func (m *measurer) getCold(r int) error {
	id := uint64(r % m.nPuts())
	m.progress("get cold %d/%d", r+1, m.cfg.Runs)
	if err := m.reopenCold(); err != nil {
		return err
	}
	before, err := ReadIOCounters()
	if err != nil {
		return err
	}
	d, err := timed(func() error { return m.peer.Get(id, discard) })
	if err != nil {
		return err
	}
	after, err := ReadIOCounters()
	if err != nil {
		return err
	}
	m.cold, m.coldRead = append(m.cold, d), m.coldRead+before.Read(after)
	if _, ok := m.peer.(Viewer); !ok {
		return nil
	}
	if err := m.reopenCold(); err != nil {
		return err
	}
	v := m.peer.(Viewer)
	d, err = timed(func() error { return v.GetViews(id) })
	m.viewsCold = append(m.viewsCold, d)
	return err
}

// reopenCold closes the store, drops its files' pages, reopens it and
// drops again whatever opening read: pages still mapped by the store after
// it opened cannot be dropped, which ColdReadRatio shows.
func (m *measurer) reopenCold() error {
	err := m.peer.Close()
	m.peer = nil
	if err != nil {
		return err
	}
	if err := DropCache(m.dir); err != nil {
		return err
	}
	if m.peer, err = m.open(m.dir, m.pk.Shape, m.pk.Tokens); err != nil {
		return err
	}
	return DropCache(m.dir)
}
