package bench

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kvstore/kvstore/internal/dirsync"
)

// plainPeer keeps one file per packet, written with one write and an fsync
// of the file and of the directory, read back with os.ReadFile: the
// practical limit of a filesystem, with no index, checksum or framing.
//
// The chunked variant ("plain-chunks") writes the same file with one
// positioned write per (layer, K|V) chunk, as kvstore does, to tell the
// cost of a store from the cost of its write pattern.
type plainPeer struct {
	dir     string
	shape   Shape
	tokens  int
	chunked bool
}

func openPlain(dir string, s Shape, tokens int) (Peer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plain: %w", err)
	}
	return &plainPeer{dir: dir, shape: s, tokens: tokens}, nil
}

func openPlainChunks(dir string, s Shape, tokens int) (Peer, error) {
	p, err := openPlain(dir, s, tokens)
	if err != nil {
		return nil, err
	}
	p.(*plainPeer).chunked = true
	return p, nil
}

func (p *plainPeer) path(id uint64) string {
	return filepath.Join(p.dir, fmt.Sprintf("%016x.kv", id))
}

func (p *plainPeer) Put(id uint64, pk *Packet) error {
	f, err := os.OpenFile(p.path(id), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("plain: put %d: %w", id, err)
	}
	err = p.write(f, pk)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dirsync.Sync(p.dir)
	}
	if err != nil {
		return fmt.Errorf("plain: put %d: %w", id, err)
	}
	return nil
}

func (p *plainPeer) write(f *os.File, pk *Packet) error {
	if !p.chunked {
		_, err := f.Write(pk.Data)
		return err
	}
	n := pk.Shape.ChunkBytes(pk.Tokens)
	for c := range pk.Chunks() {
		if _, err := f.WriteAt(pk.Chunk(c), int64(c*n)); err != nil {
			return err
		}
	}
	return nil
}

func (p *plainPeer) Get(id uint64, visit Visit) error {
	buf, err := os.ReadFile(p.path(id))
	if err != nil {
		return fmt.Errorf("plain: get %d: %w", id, err)
	}
	return visitBuffer(buf, p.shape, p.tokens, visit)
}

func (p *plainPeer) Settle() error { return nil }
func (p *plainPeer) Close() error  { return nil }
