package bench

import (
	"fmt"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// boltPeer keeps one value per (layer, K|V) chunk in one bbolt bucket, one
// read-write transaction per packet; commits fsync (NoSync false). bbolt
// writes with pwrite and reads through its mmap, so Get copies out of the
// mapping inside the read transaction.
type boltPeer struct {
	db     *bolt.DB
	shape  Shape
	tokens int
}

var boltBucket = []byte("kv")

func openBolt(dir string, s Shape, tokens int) (Peer, error) {
	db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o644, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("bbolt: open %s: %w", dir, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(boltBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("bbolt: create bucket: %w", err)
	}
	return &boltPeer{db: db, shape: s, tokens: tokens}, nil
}

func (p *boltPeer) Put(id uint64, pk *Packet) error {
	err := p.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		for c := range pk.Chunks() {
			if err := b.Put(chunkKey(id, c), pk.Chunk(c)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("bbolt: put %d: %w", id, err)
	}
	return nil
}

func (p *boltPeer) Get(id uint64, visit Visit) error {
	n := p.shape.ChunkBytes(p.tokens)
	buf := make([]byte, p.shape.PacketBytes(p.tokens))
	err := p.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		for c := range 2 * p.shape.Layers {
			v := b.Get(chunkKey(id, c))
			if len(v) != n {
				return fmt.Errorf("%w: bbolt chunk %d of %d is %d bytes", errShortRead, c, id, len(v))
			}
			copy(buf[c*n:], v)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("bbolt: get %d: %w", id, err)
	}
	return visitBuffer(buf, p.shape, p.tokens, visit)
}

func (p *boltPeer) Settle() error { return nil }

func (p *boltPeer) Close() error {
	if err := p.db.Close(); err != nil {
		return fmt.Errorf("bbolt: close: %w", err)
	}
	return nil
}
