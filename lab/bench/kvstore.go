package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// kvPeer is kvstore itself with its default options (CRC verification on,
// mmap on). Packet id i is the packet whose token ids are TokenIDs(i), in
// namespace "bench", so a reopened peer finds packets without a map.
//
// Its Get takes a View and reads every byte through it: View.Layer
// verifies each chunk's CRC32C the first time the store sees it, and a
// pass over every byte (touch) follows, because a chunk already verified
// is handed out without being read, and a read must read. GetViews is the
// Get alone: views handed out, no payload byte touched.
type kvPeer struct {
	db     *store.DB
	spec   *format.ModelSpec
	fp     format.Fingerprint
	shape  Shape
	tokens int
	sink   uint64      // keeps touch from being optimised away
	dst    *store.Dest // Assemble's destination, allocated on first use
}

const kvNamespace = "bench"

func openKVStore(dir string, s Shape, tokens int) (Peer, error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := store.Open(dir, &store.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("kvstore: open %s: %w", dir, err)
	}
	spec := s.Spec()
	return &kvPeer{db: db, spec: spec, fp: spec.Fingerprint(), shape: s, tokens: tokens}, nil
}

func (p *kvPeer) packetID(id uint64) format.PacketID {
	return format.ComputePacketID(kvNamespace, p.fp, "", TokenIDs(id, p.tokens))
}

func (p *kvPeer) Put(id uint64, pk *Packet) error {
	layers := make([]store.Layer, pk.Shape.Layers)
	for l := range layers {
		layers[l].K, layers[l].V = pk.Layer(l)
	}
	got, err := p.db.Put(context.Background(), &store.Packet{
		PacketDesc: format.PacketDesc{Namespace: kvNamespace, Model: p.spec, TokenIDs: TokenIDs(id, pk.Tokens)},
		Layers:     layers,
	})
	if err != nil {
		return fmt.Errorf("kvstore: put %d: %w", id, err)
	}
	if want := p.packetID(id); got != want {
		return fmt.Errorf("kvstore: put %d: store returned packet id %s, want %s", id, got.Short(), want.Short())
	}
	return nil
}

func (p *kvPeer) Get(id uint64, visit Visit) error {
	v, err := p.db.Get(context.Background(), kvNamespace, p.fp, p.packetID(id))
	if err != nil {
		return fmt.Errorf("kvstore: get %d: %w", id, err)
	}
	defer v.Release()
	return p.readView(v, visit)
}

func (p *kvPeer) readView(v *store.View, visit Visit) error {
	for l := range v.Layers() {
		k, val, err := v.Layer(l)
		if err != nil {
			return fmt.Errorf("kvstore: layer %d: %w", l, err)
		}
		p.sink += touch(k) + touch(val)
		if err := visit(l, k, val); err != nil {
			return err
		}
	}
	return nil
}

func (p *kvPeer) GetViews(id uint64) error {
	v, err := p.db.Get(context.Background(), kvNamespace, p.fp, p.packetID(id))
	if err != nil {
		return fmt.Errorf("kvstore: get views %d: %w", id, err)
	}
	v.Release()
	return nil
}

// Assemble is store.Assemble of ids at consecutive positions (packet i's
// rows at i*tokens) into one contiguous destination that the peer allocates
// on first use and reuses, as a server reuses its KV cache: every key
// re-rotated, every value copied, chunks verified on first read, on every
// core. Visit then gets the destination's layers.
func (p *kvPeer) Assemble(ids []uint64, visit Visit) error {
	items := make([]store.AssembleItem, len(ids))
	for i, id := range ids {
		items[i] = store.AssembleItem{ID: p.packetID(id), Offset: int64(i * p.tokens)}
	}
	if n := p.shape.ChunkBytes(len(ids) * p.tokens); p.dst == nil || len(p.dst.K[0]) != n {
		p.dst = store.NewContiguousDest(p.spec, len(ids)*p.tokens)
	}
	if err := p.db.Assemble(context.Background(), kvNamespace, p.fp, items, p.dst, nil); err != nil {
		return fmt.Errorf("kvstore: assemble: %w", err)
	}
	for l := range p.shape.Layers {
		if err := visit(l, p.dst.K[l], p.dst.V[l]); err != nil {
			return err
		}
	}
	return nil
}

// AssembleLabel says what Assemble measures.
func (p *kvPeer) AssembleLabel() string {
	return fmt.Sprintf("store.Assemble: keys re-rotated to consecutive positions and values copied into one reused contiguous destination, %d workers",
		runtime.GOMAXPROCS(0))
}

// Settle has nothing to wait for: payloads are in synced blob files and the
// catalog holds only headers.
func (p *kvPeer) Settle() error { return nil }

func (p *kvPeer) Close() error {
	if err := p.db.Close(); err != nil {
		return fmt.Errorf("kvstore: close: %w", err)
	}
	return nil
}

// PutProfile reports the store's own sync timers: fdatasync of blob files
// and synced catalog commits.
func (p *kvPeer) PutProfile() map[string]time.Duration {
	st := p.db.Stats()
	return map[string]time.Duration{"blob fdatasync": st.BlobSyncTime, "catalog commit (synced)": st.CatalogSyncTime}
}

// touch reads every byte of b and folds them into a word.
func touch(b []byte) uint64 {
	var x0, x1, x2, x3 uint64
	for ; len(b) >= 32; b = b[32:] {
		x0 ^= binary.LittleEndian.Uint64(b)
		x1 ^= binary.LittleEndian.Uint64(b[8:])
		x2 ^= binary.LittleEndian.Uint64(b[16:])
		x3 ^= binary.LittleEndian.Uint64(b[24:])
	}
	for _, c := range b {
		x0 += uint64(c)
	}
	return x0 ^ x1 ^ x2 ^ x3
}
