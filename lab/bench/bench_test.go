package bench

import (
	"sync"
	"testing"
)

// The Go benchmarks measure a subset of what Run does — one Llama-3.1-8B
// packet of 256 tokens (32 MiB) per operation, every store — so that
// `go test -bench . ./lab/bench` works; the full comparison is
// `kvbench`. Each store starts empty in b.TempDir().

const benchTokens = 256

var benchPacket = sync.OnceValue(func() *Packet { return NewPacket(Llama8B, benchTokens, 1) })

func BenchmarkPut(b *testing.B) {
	for _, name := range StoreNames() {
		b.Run(name, func(b *testing.B) {
			pk := benchPacket()
			peer := openBench(b, name)
			b.SetBytes(int64(len(pk.Data)))
			b.ReportAllocs()
			id := uint64(0)
			for b.Loop() {
				if err := peer.Put(id, pk); err != nil {
					b.Fatal(err)
				}
				id++
			}
		})
	}
}

func BenchmarkGetWarm(b *testing.B) {
	for _, name := range StoreNames() {
		b.Run(name, func(b *testing.B) {
			peer := openBench(b, name)
			putBench(b, peer)
			if err := peer.Get(0, discard); err != nil { // warm the page cache
				b.Fatal(err)
			}
			b.SetBytes(int64(len(benchPacket().Data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := peer.Get(0, discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGetCold closes the store, drops its files from the page cache
// and reopens it, untimed, before each timed Get.
func BenchmarkGetCold(b *testing.B) {
	for _, name := range StoreNames() {
		b.Run(name, func(b *testing.B) {
			m := &measurer{name: name, open: opener(name), pk: benchPacket(), dir: b.TempDir()}
			var err error
			if m.peer, err = m.open(m.dir, Llama8B, benchTokens); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { m.peer.Close() })
			putBench(b, m.peer)
			if err := m.reopenCold(); err != nil { // see interleave
				b.Fatal(err)
			}
			b.SetBytes(int64(len(m.pk.Data)))
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				if err := m.reopenCold(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := m.peer.Get(0, discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func openBench(b *testing.B, name string) Peer {
	peer, err := opener(name)(b.TempDir(), Llama8B, benchTokens)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { peer.Close() })
	return peer
}

func putBench(b *testing.B, peer Peer) {
	if err := peer.Put(0, benchPacket()); err != nil {
		b.Fatal(err)
	}
	if err := peer.Settle(); err != nil {
		b.Fatal(err)
	}
}
