package bench

import (
	"fmt"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// pebblePeer keeps the tensors inline as Pebble values, one per (layer,
// K|V) chunk, each packet one batch committed with Sync: "Pebble-inline",
// what DESIGN.md measured before choosing a blob log. Options are Pebble's
// defaults (value separation off) with its logging silenced.
type pebblePeer struct {
	db     *pebble.DB
	shape  Shape
	tokens int
}

func openPebble(dir string, s Shape, tokens int) (Peer, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("pebble: open %s: %w", dir, err)
	}
	return &pebblePeer{db: db, shape: s, tokens: tokens}, nil
}

func (p *pebblePeer) Put(id uint64, pk *Packet) error {
	b := p.db.NewBatchWithSize(len(pk.Data) + 64*pk.Chunks())
	defer b.Close()
	for c := range pk.Chunks() {
		if err := b.Set(chunkKey(id, c), pk.Chunk(c), nil); err != nil {
			return fmt.Errorf("pebble: put %d: %w", id, err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("pebble: put %d: %w", id, err)
	}
	return nil
}

func (p *pebblePeer) Get(id uint64, visit Visit) error {
	n := p.shape.ChunkBytes(p.tokens)
	buf := make([]byte, p.shape.PacketBytes(p.tokens))
	for c := range 2 * p.shape.Layers {
		v, closer, err := p.db.Get(chunkKey(id, c))
		if err != nil {
			return fmt.Errorf("pebble: get %d chunk %d: %w", id, c, err)
		}
		if len(v) != n {
			closer.Close()
			return fmt.Errorf("%w: pebble chunk %d of %d is %d bytes", errShortRead, c, id, len(v))
		}
		copy(buf[c*n:], v)
		closer.Close()
	}
	return visitBuffer(buf, p.shape, p.tokens, visit)
}

// Settle flushes the memtables and waits until no flush or compaction is
// running (two quiet polls 1 ms apart), for at most ten minutes.
func (p *pebblePeer) Settle() error {
	if err := p.db.Flush(); err != nil {
		return fmt.Errorf("pebble: flush: %w", err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for quiet := 0; quiet < 2; time.Sleep(time.Millisecond) {
		m := p.db.Metrics()
		if m.Compact.NumInProgress > 0 || m.Flush.NumInProgress > 0 {
			quiet = 0
		} else {
			quiet++
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pebble: compactions still running after 10 minutes")
		}
	}
	return nil
}

func (p *pebblePeer) Close() error {
	if err := p.db.Close(); err != nil {
		return fmt.Errorf("pebble: close: %w", err)
	}
	return nil
}

// quietLogger drops Pebble's informational logging, which would interleave
// with the harness's progress line, keeps its errors on stderr, and treats
// Fatalf as the broken Pebble invariant it is.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
