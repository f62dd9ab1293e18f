package bench

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/kvstore/kvstore/format"
)

// Packet is one synthetic document's KV cache in kvstore's layout (see the
// package comment). Data is read-only once made: every store and every run
// of a benchmark shares it.
type Packet struct {
	Shape  Shape
	Tokens int
	Data   []byte
}

// Chunks is the number of (layer, K|V) chunks.
func (p *Packet) Chunks() int { return 2 * p.Shape.Layers }

// Chunk returns chunk c: layer c/2, K when c is even, V when odd.
func (p *Packet) Chunk(c int) []byte {
	n := p.Shape.ChunkBytes(p.Tokens)
	return p.Data[c*n : (c+1)*n : (c+1)*n]
}

// Layer returns layer l's keys and values.
func (p *Packet) Layer(l int) (k, v []byte) { return p.Chunk(2 * l), p.Chunk(2*l + 1) }

// TokenIDs are the token ids a store that keys packets by content files
// packet id under: distinct for distinct ids, the same for the same id.
func TokenIDs(id uint64, tokens int) []uint32 {
	out := make([]uint32, tokens)
	for i := range out {
		out[i] = uint32(id)*2654435761 ^ uint32(i)
	}
	return out
}

// NewPacket generates a packet of the given shape and token count from seed.
// The values are KV-like rather than uniform noise, so that codecs and
// block compressors inside the peers behave as they would on real caches:
// each channel of each head draws from a Gaussian with its own scale
// (log-normal across channels) and, for keys, its own mean and a few
// outlier channels several times larger, as observed in trained models.
// Values are rounded to bf16. The same arguments give the same bytes.
func NewPacket(s Shape, tokens int, seed uint64) *Packet {
	p := &Packet{Shape: s, Tokens: tokens, Data: make([]byte, s.PacketBytes(tokens))}
	work := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for c := range work {
				fillChunk(p.Chunk(c), s, tokens, c%2 == 0, seed, uint64(c))
			}
		})
	}
	for c := range p.Chunks() {
		work <- c
	}
	close(work)
	wg.Wait()
	return p
}

// fillChunk writes one [heads][tokens][head_dim] chunk from its own
// generator, so the result does not depend on which goroutine runs it.
func fillChunk(dst []byte, s Shape, tokens int, keys bool, seed, chunk uint64) {
	rng := rand.New(rand.NewPCG(seed, chunk))
	mean := make([]float64, s.HeadDim)
	scale := make([]float64, s.HeadDim)
	i := 0
	for range s.KVHeads {
		channelStats(rng, keys, mean, scale)
		for range tokens {
			for c := range s.HeadDim {
				x := float32(mean[c] + scale[c]*rng.NormFloat64())
				binary.LittleEndian.PutUint16(dst[i:], format.F32ToBF16(x))
				i += 2
			}
		}
	}
}

// channelStats draws per-channel means and scales for one head.
func channelStats(rng *rand.Rand, keys bool, mean, scale []float64) {
	for c := range scale {
		scale[c] = math.Exp(0.5 * rng.NormFloat64())
		mean[c] = 0
		if keys {
			mean[c] = 0.5 * rng.NormFloat64()
			if rng.IntN(32) == 0 { // ~4 outlier channels per 128
				scale[c] *= 8
				mean[c] *= 8
			}
		}
	}
}
