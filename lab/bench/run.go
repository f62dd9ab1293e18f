package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/kvstore/kvstore/format"
)

// Config says what Run measures and where.
type Config struct {
	// Dir is the scratch root, an existing directory on the disk to
	// measure. Each (store, shape, tokens) gets a fresh subdirectory,
	// removed when it is done.
	Dir    string
	Shapes []Shape
	Tokens []int
	// Runs is how many timed runs each figure is the median of.
	Runs int
	// Stores are names from StoreNames; the report keeps their order.
	Stores []string
	// AssembleN is how many packets one Assemble reads; 0 skips Assemble.
	AssembleN int
	// AssembleMaxBytes skips Assemble for a case whose AssembleN packets
	// exceed it (the report says so); 0 is no limit.
	AssembleMaxBytes int64
	// Seed makes the synthetic packets.
	Seed uint64
	// Progress, when set, is told what is being measured.
	Progress func(msg string)
}

// Validate checks that c describes something Run can do.
func (c *Config) Validate() error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: bench config: %s", format.ErrInvalidArgument, fmt.Sprintf(f, a...))
	}
	switch {
	case c.Dir == "":
		return bad("no scratch directory")
	case len(c.Shapes) == 0 || len(c.Tokens) == 0 || len(c.Stores) == 0:
		return bad("no shapes, token counts or stores")
	case c.Runs < 1:
		return bad("runs %d < 1", c.Runs)
	case c.AssembleN < 0 || c.AssembleMaxBytes < 0:
		return bad("negative assemble settings")
	}
	for _, n := range c.Tokens {
		if n < 1 {
			return bad("token count %d < 1", n)
		}
	}
	for _, s := range c.Stores {
		if opener(s) == nil {
			return bad("unknown store %q", s)
		}
	}
	if st, err := os.Stat(c.Dir); err != nil || !st.IsDir() {
		return bad("scratch %s is not a directory", c.Dir)
	}
	return nil
}

// Run measures every store on every (shape, tokens) case, one store at a
// time, all on the same packet bytes. A store that fails keeps its row with
// the error, and Run goes on; the error returned is the first such failure
// (the report is complete either way) or a configuration error (no report).
func Run(cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep := newReport(cfg)
	var firstErr error
	for _, s := range cfg.Shapes {
		for _, tokens := range cfg.Tokens {
			c := runCase(cfg, s, tokens)
			rep.Cases = append(rep.Cases, c)
			for _, r := range c.Rows {
				if r.Err != "" && firstErr == nil {
					firstErr = fmt.Errorf("%s on %s/%d: %s", r.Store, s.Name, tokens, r.Err)
				}
			}
		}
	}
	return rep, firstErr
}

func runCase(cfg Config, s Shape, tokens int) *Case {
	cfg.progress("%s %d tokens: generating %.1f MiB packet", s.Name, tokens, mib(s.PacketBytes(tokens)))
	pk := NewPacket(s, tokens, cfg.Seed)
	c := &Case{Shape: s.Name, Tokens: tokens, PacketBytes: int64(len(pk.Data)), shape: s}
	asm := cfg.AssembleN
	if asm > 0 && cfg.AssembleMaxBytes > 0 && int64(asm)*c.PacketBytes > cfg.AssembleMaxBytes {
		c.AssembleSkipped = fmt.Sprintf("%d packets = %.0f MiB > the %.0f MiB limit",
			asm, mib(int64(asm)*c.PacketBytes), mib(cfg.AssembleMaxBytes))
		asm = 0
	}
	var ms []*measurer
	for _, name := range cfg.Stores {
		dir := filepath.Join(cfg.Dir, fmt.Sprintf("%s-%s-%d", name, s.Name, tokens))
		ms = append(ms, newMeasurer(cfg, name, dir, pk, asm))
	}
	interleave(cfg, ms, asm > 0)
	for _, m := range ms {
		c.Rows = append(c.Rows, m.finish())
	}
	c.setRatios()
	return c
}

// interleave runs every step of the measurement for every store before the
// next step: Put i of every store, then Put i+1, and so on. The order of the
// stores rotates from one step to the next, so that no store always runs
// right after another (measured here: a 125 MiB write(2) runs 4-5x slower
// when it follows another store's writes than after a pause, the page cache
// then needing reclaim).
func interleave(cfg Config, ms []*measurer, assemble bool) {
	rot := 0
	each := func(step func(m *measurer) error) {
		dropAll(ms)
		for j := range ms {
			m := ms[(j+rot)%len(ms)]
			m.do(func() error { return step(m) })
			runtime.GC()
		}
		rot++
	}
	each((*measurer).start)
	for i := range ms[0].nPuts() {
		each(func(m *measurer) error { return m.put(i) })
	}
	each(func(m *measurer) error {
		var err error
		m.row.DiskBytes, err = DiskUsage(m.dir)
		return err
	})
	each((*measurer).verify)
	// Reopened once before any cold run: Badger reads its whole last value
	// log through its mapping when it opens after writes, and mapped pages
	// cannot be dropped until the next close.
	each((*measurer).reopenCold)
	steps := []func(*measurer, int) error{(*measurer).getWarm, (*measurer).getCold}
	if assemble {
		steps = append(steps, (*measurer).assemble)
	}
	for _, step := range steps {
		for r := range cfg.Runs {
			each(func(m *measurer) error { return step(m, r) })
		}
	}
}

// dropAll drops the page cache of every store's files before each round of
// a step, so that every round starts with the same free memory, whatever
// the stores read or wrote before: measured here, writes slowed down 4-5x
// as the page cache grew, whoever wrote. A warm Get warms its own packet
// right before it is timed. First it flushes every dirty page of the
// machine (sync(2)): writeback left by other processes (a build that just
// wrote its cache) would otherwise slow the first rounds' syncs, whichever
// store ran them (seen here: a whole case's Puts 3x slower after a test run
// wrote 900 MB).
func dropAll(ms []*measurer) {
	syncAll()
	for _, m := range ms {
		m.do(func() error { return DropCache(m.dir) })
	}
}

func (c *Config) progress(f string, a ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(f, a...))
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// timed runs f once after a garbage collection, so that one run does not
// pay for the garbage of the last.
func timed(f func() error) (time.Duration, error) {
	runtime.GC()
	t := time.Now()
	err := f()
	return time.Since(t), err
}
