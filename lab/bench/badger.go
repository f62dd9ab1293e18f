package bench

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// badgerPeer keeps one value per (layer, K|V) chunk in Badger v4, a Go
// WiscKey store: every chunk goes to the value log (ValueThreshold 1 KiB),
// whose files are as large as Badger allows (2 GiB - 1), and every commit
// is synced (SyncWrites). One transaction per packet.
type badgerPeer struct {
	db     *badger.DB
	shape  Shape
	tokens int
}

func openBadger(dir string, s Shape, tokens int) (Peer, error) {
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(true).
		WithValueThreshold(1 << 10).
		WithValueLogFileSize(2<<30 - 1).
		WithLogger(nil)
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("badger: open %s: %w", dir, err)
	}
	return &badgerPeer{db: db, shape: s, tokens: tokens}, nil
}

func (p *badgerPeer) Put(id uint64, pk *Packet) error {
	txn := p.db.NewTransaction(true)
	defer txn.Discard()
	for c := range pk.Chunks() {
		if err := txn.Set(chunkKey(id, c), pk.Chunk(c)); err != nil {
			return fmt.Errorf("badger: put %d: %w", id, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("badger: put %d: %w", id, err)
	}
	return nil
}

func (p *badgerPeer) Get(id uint64, visit Visit) error {
	n := p.shape.ChunkBytes(p.tokens)
	buf := make([]byte, p.shape.PacketBytes(p.tokens))
	txn := p.db.NewTransaction(false)
	defer txn.Discard()
	for c := range 2 * p.shape.Layers {
		item, err := txn.Get(chunkKey(id, c))
		if err != nil {
			return fmt.Errorf("badger: get %d chunk %d: %w", id, c, err)
		}
		err = item.Value(func(v []byte) error {
			if len(v) != n {
				return fmt.Errorf("%w: badger chunk %d of %d is %d bytes", errShortRead, c, id, len(v))
			}
			copy(buf[c*n:], v)
			return nil
		})
		if err != nil {
			return fmt.Errorf("badger: get %d chunk %d: %w", id, c, err)
		}
	}
	return visitBuffer(buf, p.shape, p.tokens, visit)
}

// Settle has nothing to wait for: the values are in the synced value log
// and Badger's LSM holds only pointers.
func (p *badgerPeer) Settle() error { return nil }

func (p *badgerPeer) Close() error {
	if err := p.db.Close(); err != nil {
		return fmt.Errorf("badger: close: %w", err)
	}
	return nil
}
