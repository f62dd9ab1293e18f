package bench

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// measurer takes every figure of one store on one case. Run interleaves
// the measurers of a case run by run (see runCase), so each store meets the
// same machine: on a shared machine the load drifts, and a store measured
// alone in a busy minute would carry that minute in its figures.
type measurer struct {
	cfg       Config
	name      string
	open      Opener
	pk        *Packet
	dir       string
	assembleN int

	peer Peer
	row  *Row
	err  error // the first failure; a failed measurer does nothing more

	puts, settles, warm, cold, views, viewsCold, asm []time.Duration
	written, coldRead                                int64
	profile                                          map[string]time.Duration
}

func newMeasurer(cfg Config, name, dir string, pk *Packet, assembleN int) *measurer {
	return &measurer{cfg: cfg, name: name, open: opener(name), pk: pk, dir: dir,
		assembleN: assembleN, row: &Row{Store: name}}
}

// do runs step unless the measurer has failed, and remembers its error.
func (m *measurer) do(step func() error) {
	if m.err == nil {
		m.err = step()
	}
}

func (m *measurer) progress(f string, a ...any) {
	m.cfg.progress("%s %d tokens, %s: %s", m.pk.Shape.Name, m.pk.Tokens, m.name, fmt.Sprintf(f, a...))
}

// nPuts is how many distinct packets the store gets: one per timed Put
// run, and enough for an Assemble.
func (m *measurer) nPuts() int { return max(m.cfg.Runs, m.assembleN) }

// start opens the store in a fresh directory.
func (m *measurer) start() error {
	if err := os.RemoveAll(m.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return err
	}
	var err error
	m.peer, err = m.open(m.dir, m.pk.Shape, m.pk.Tokens)
	return err
}

// put times Put of packet i and then Settle, the background work the Put
// left (Pebble's flush and compactions), and counts what the process wrote
// to storage over both: the store pays for its own background work, in time
// and in write amplification, and not the store measured next.
func (m *measurer) put(i int) error {
	m.progress("put %d/%d", i+1, m.nPuts())
	before, err := ReadIOCounters()
	if err != nil {
		return err
	}
	prof, _ := m.peer.(Profiler)
	var p0 map[string]time.Duration
	if prof != nil {
		p0 = prof.PutProfile()
	}
	d, err := timed(func() error { return m.peer.Put(uint64(i), m.pk) })
	if err != nil {
		return err
	}
	if prof != nil {
		m.addProfile(p0, prof.PutProfile())
	}
	s, err := timed(m.peer.Settle)
	if err != nil {
		return err
	}
	after, err := ReadIOCounters()
	if err != nil {
		return err
	}
	m.puts, m.settles, m.written = append(m.puts, d), append(m.settles, s), m.written+before.Written(after)
	return nil
}

func (m *measurer) addProfile(before, after map[string]time.Duration) {
	if m.profile == nil {
		m.profile = map[string]time.Duration{}
	}
	for k, v := range after {
		m.profile[k] += v - before[k]
	}
}

// finish fills the row, closes the store and removes its directory.
func (m *measurer) finish() *Row {
	m.do(m.fill)
	if m.peer != nil {
		m.err = errors.Join(m.err, m.peer.Close())
	}
	if err := os.RemoveAll(m.dir); err != nil {
		m.err = errors.Join(m.err, err)
	}
	if m.err != nil {
		m.row.Err = m.err.Error()
	}
	return m.row
}

func (m *measurer) fill() error {
	size := int64(len(m.pk.Data))
	r := m.row
	settled := make([]time.Duration, len(m.puts))
	var settle time.Duration
	for i := range m.puts {
		settled[i] = m.puts[i] + m.settles[i]
		settle += m.settles[i]
	}
	r.Put, r.PutCall = newStat(size, settled), newStat(size, m.puts)
	r.GetWarm, r.GetCold = newStat(size, m.warm), newStat(size, m.cold)
	r.Assemble = newStat(int64(m.assembleN)*size, m.asm)
	r.ViewsWarm, r.ViewsCold = newStat(0, m.views), newStat(0, m.viewsCold) // views move no payload byte
	r.SettleSeconds = settle.Seconds()
	if m.profile != nil {
		var total, named time.Duration
		for _, d := range m.puts {
			total += d
		}
		r.PutProfile = map[string]float64{}
		for k, d := range m.profile {
			r.PutProfile[k] = d.Seconds()
			named += d
		}
		r.PutProfile["rest (writes, CRCs, header)"] = (total - named).Seconds()
	}
	r.PayloadBytes = int64(len(m.puts)) * size
	r.WriteAmp = float64(m.written) / float64(max(r.PayloadBytes, 1))
	r.ColdReadRatio = float64(m.coldRead) / float64(max(int64(len(m.cold))*size, 1))
	return nil
}
