package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kvstore/kvstore/format"
)

// Peer is one store under test, opened on its own directory.
//
// A Peer is used by one goroutine at a time.
type Peer interface {
	// Put stores p under id and returns once p is durable: a crash after
	// Put returns loses nothing.
	Put(id uint64, p *Packet) error
	// Get reads every byte of packet id and hands them to visit, one layer
	// at a time, in the packet's layout. The slices are valid only during
	// the call. Peers may copy out of their own buffers; what Get measures
	// is the cost of having every byte in the caller's hands.
	Get(id uint64, visit Visit) error
	// Settle waits for the background work Puts left behind (memtable
	// flushes, compactions), so that later reads come from disk files and
	// write amplification counts everything.
	Settle() error
	// Close releases every file and mapping; no page of the store's files
	// stays mapped after it returns.
	Close() error
}

// Visit receives one layer of a packet read by Peer.Get.
type Visit func(layer int, k, v []byte) error

// Viewer is implemented by peers that can hand out a packet without
// reading it (kvstore's zero-copy views): the cost of a Get that touches
// no payload byte.
type Viewer interface {
	GetViews(id uint64) error
}

// Assembler is implemented by peers with a native multi-packet read.
type Assembler interface {
	// Assemble reads the packets ids as one request and visits every byte.
	Assemble(ids []uint64, visit Visit) error
	// AssembleLabel says what Assemble measures, for the report.
	AssembleLabel() string
}

// Profiler is implemented by peers that can say where their Put time goes:
// cumulative durations by name since the peer was opened.
type Profiler interface {
	PutProfile() map[string]time.Duration
}

// Opener opens (or creates) a peer's store in dir for packets of shape s
// and the given token count: every packet of one store has the same size.
type Opener func(dir string, s Shape, tokens int) (Peer, error)

// peers lists the stores Run knows, in report order.
var peers = []struct {
	name string
	open Opener
}{
	{"kvstore", openKVStore},
	{"plain", openPlain},
	{"plain-chunks", openPlainChunks},
	{"pebble", openPebble},
	{"badger", openBadger},
	{"bbolt", openBolt},
}

// DefaultStores are the stores the issue compares; StoreNames adds
// plain-chunks, plain files written chunk by chunk.
var DefaultStores = []string{"kvstore", "plain", "pebble", "badger", "bbolt"}

// StoreNames lists the stores Run can measure, in report order.
func StoreNames() []string {
	var out []string
	for _, p := range peers {
		out = append(out, p.name)
	}
	return out
}

// ParseStores parses a comma-separated list of store names; "all" is every
// store. The result is in report order, without duplicates.
func ParseStores(s string) ([]string, error) {
	if s == "all" {
		return StoreNames(), nil
	}
	want := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if opener(name) == nil {
			return nil, fmt.Errorf("%w: unknown store %q (want one of %s)",
				format.ErrInvalidArgument, name, strings.Join(StoreNames(), ", "))
		}
		want[name] = true
	}
	return slices.DeleteFunc(StoreNames(), func(n string) bool { return !want[n] }), nil
}

func opener(name string) Opener {
	for _, p := range peers {
		if p.name == name {
			return p.open
		}
	}
	return nil
}

// chunkKey is the key of chunk c (layer c/2, K|V) of packet id in the
// key-value peers; see the package comment. Packets are keyed by a hash of
// id, as content-addressed packet ids are: successive Puts land at random
// places in the key space, not in ascending order (which would let an LSM
// move its tables down without rewriting them).
func chunkKey(id uint64, c int) []byte {
	k := make([]byte, 11)
	binary.BigEndian.PutUint64(k, mix64(id))
	binary.BigEndian.PutUint16(k[8:], uint16(c/2))
	k[10] = byte(c % 2)
	return k
}

// visitBuffer hands a whole packet held in buf to visit, layer by layer.
func visitBuffer(buf []byte, s Shape, tokens int, visit Visit) error {
	n := s.ChunkBytes(tokens)
	if len(buf) != 2*s.Layers*n {
		return fmt.Errorf("%w: read %d bytes, want %d", errShortRead, len(buf), 2*s.Layers*n)
	}
	for l := range s.Layers {
		o := 2 * l * n
		if err := visit(l, buf[o:o+n], buf[o+n:o+2*n]); err != nil {
			return err
		}
	}
	return nil
}

// errShortRead says a store returned fewer or more bytes than were put.
var errShortRead = errors.New("bench: wrong packet size")

// mix64 is SplitMix64's finaliser: a bijection of uint64 that scatters
// neighbouring ids across the key space.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
