package tier

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// benchSpec is a mid-sized model: 8 layers of 8 KV heads x 128 dims, f16,
// 32 KiB of payload per token.
func benchSpec() *format.ModelSpec {
	return &format.ModelSpec{Architecture: "llama", Layers: 8, KVHeads: 8, HeadDim: 128, DType: format.DTypeF16,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, WeightsID: "tier-bench"}
}

// benchTokens makes a 16 MiB packet.
const benchTokens = 512

// BenchmarkTierPutGet pairs, inside each iteration and against the same
// versitygw, kvstore's Push (then Fetch) of a 16 MiB packet with the raw
// S3 client writing (then reading) the same payload as the same 4 MiB
// parts, Options.Parallel at once, alternating which side goes first. kvstore-put-MB/s and raw-put-MB/s (and
// -get-) are each side's own rate; ns/op covers both.
func BenchmarkTierPutGet(b *testing.B) {
	e := newEnv(b, Options{})
	ctx := context.Background()
	raw := e.srv.Client()
	m := benchSpec()
	b.ReportAllocs()
	var ours, theirs [2]time.Duration // put, get
	var n int64
	for i := 0; b.Loop(); i++ {
		p := testPacket("bench", m, benchTokens, uint64(100+i)) // a new id each time
		payload := make([][]byte, 0, 2*m.Layers)
		for _, l := range p.Layers {
			payload = append(payload, l.K, l.V)
		}
		size := int64(2 * m.Layers * len(p.Layers[0].K))
		n = size
		b.SetBytes(size)

		var id format.PacketID
		var keys []string
		ops := []func(){
			func() { // kvstore put, then get
				start := time.Now()
				var err error
				if id, _, err = e.tier.Push(ctx, p); err != nil {
					b.Fatal(err)
				}
				ours[0] += time.Since(start)
				start = time.Now()
				if _, err := e.tier.Fetch(ctx, "bench", m.Fingerprint(), id); err != nil {
					b.Fatal(err)
				}
				ours[1] += time.Since(start)
			},
			func() { // raw put, then get
				start := time.Now()
				keys = rawPut(b, e, raw, fmt.Sprintf("raw/%d", i), payload, uint64(len(p.Layers[0].K)))
				theirs[0] += time.Since(start)
				start = time.Now()
				rawGet(b, e, raw, keys, size)
				theirs[1] += time.Since(start)
			},
		}
		// Alternate which side goes first, so neither always meets the
		// other's leftovers (server write-back, a warm connection pool).
		ops[i%2]()
		ops[1-i%2]()
	}
	rate := func(d time.Duration) float64 { return float64(n) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(rate(ours[0]), "kvstore-put-MB/s")
	b.ReportMetric(rate(theirs[0]), "raw-put-MB/s")
	b.ReportMetric(rate(ours[1]), "kvstore-get-MB/s")
	b.ReportMetric(rate(theirs[1]), "raw-get-MB/s")
}

// rawPut writes payload (chunks of chunkLen) as parts of the tier's part
// size under prefix, Parallel at once, with plain PutObject calls.
func rawPut(b *testing.B, e *env, raw *s3.Client, prefix string, payload [][]byte, chunkLen uint64) []string {
	size := uint64(len(payload)) * chunkLen
	ps := uint32(e.tier.opts.PartSize)
	parts := partCount(size, ps)
	keys := make([]string, parts)
	err := e.tier.parallel(context.Background(), parts, func(ctx context.Context, i int, buf []byte) error {
		off := uint64(i) * uint64(ps)
		part := gather(buf[:min(uint64(ps), size-off)], payload, chunkLen, off)
		keys[i] = fmt.Sprintf("%s/%06d", prefix, i)
		_, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: &keys[i],
			Body: bytes.NewReader(part), ContentLength: aws.Int64(int64(len(part)))})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return keys
}

// rawGet reads keys into one buffer of size bytes, Parallel at once.
func rawGet(b *testing.B, e *env, raw *s3.Client, keys []string, size int64) {
	buf := make([]byte, size)
	ps := int64(e.tier.opts.PartSize)
	err := e.tier.parallel(context.Background(), len(keys), func(ctx context.Context, i int, _ []byte) error {
		out, err := raw.GetObject(ctx, &s3.GetObjectInput{Bucket: &e.bucket, Key: &keys[i]})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		off := int64(i) * ps
		_, err = io.ReadFull(out.Body, buf[off:min(off+ps, size)])
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkColdAssemble pairs, inside each iteration, an Assemble of 10
// packets (2 MiB each) into an empty local store through a Cache (every
// packet fetched from the tier, verified, Put locally, then assembled) with
// the same Assemble from a store that holds them on local disk (its page
// cache warm: the figure is the local path's cost, not a cold disk's).
func BenchmarkColdAssemble(b *testing.B) {
	e := newEnv(b, Options{})
	ctx := context.Background()
	m := benchSpec()
	src := &Cache{DB: openDB(b, nil), Tier: e.tier}
	var items []store.AssembleItem
	tokens := 0
	for i := range 10 {
		p := testPacket("bench", m, 64, uint64(1000+i))
		id, err := src.Put(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		items = append(items, store.AssembleItem{ID: id, Offset: int64(tokens)})
		tokens += p.Tokens()
	}
	dst := store.NewContiguousDest(m, tokens)
	size := int64(2 * m.Layers * len(dst.K[0]))
	b.SetBytes(size)
	b.ReportAllocs()
	var tierT, localT time.Duration
	for b.Loop() {
		b.StopTimer()
		db, err := store.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		cold := &Cache{DB: db, Tier: e.tier}
		b.StartTimer()
		start := time.Now()
		if err := cold.Assemble(ctx, "bench", m.Fingerprint(), items, dst, nil); err != nil {
			b.Fatal(err)
		}
		tierT += time.Since(start)
		start = time.Now()
		if err := src.DB.Assemble(context.Background(), "bench", m.Fingerprint(), items, dst, nil); err != nil {
			b.Fatal(err)
		}
		localT += time.Since(start)
		b.StopTimer()
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(tierT.Microseconds())/float64(b.N)/1e3, "tier-ms/assemble")
	b.ReportMetric(float64(localT.Microseconds())/float64(b.N)/1e3, "local-ms/assemble")
}
