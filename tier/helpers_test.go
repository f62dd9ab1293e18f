package tier

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/s3test"
	"github.com/kvstore/kvstore/store"
)

// testSpec is a small model: 4 layers of 2 KV heads x 16 dims, f32, so one
// token is 512 bytes of payload.
func testSpec() *format.ModelSpec {
	return &format.ModelSpec{Architecture: "llama", Layers: 4, KVHeads: 2, HeadDim: 16, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, WeightsID: "tier-test"}
}

// testPacket returns a packet of tokens tokens whose tensors are random
// but fixed by seed (finite f32 values, so every codec accepts them).
func testPacket(ns string, m *format.ModelSpec, tokens int, seed uint64) *store.Packet {
	r := rand.New(rand.NewPCG(seed, 7))
	p := &store.Packet{PacketDesc: format.PacketDesc{Namespace: ns, Model: m}}
	for i := range tokens {
		p.TokenIDs = append(p.TokenIDs, uint32(seed*1000+uint64(i)))
	}
	n := m.KVHeads * tokens * m.HeadDim * m.DType.Size()
	for range m.Layers {
		k, v := make([]byte, n), make([]byte, n)
		fill := func(b []byte) {
			for i := 0; i+4 <= len(b); i += 4 {
				// small integers as f32: exact under any shift back and forth
				b[i], b[i+1], b[i+2], b[i+3] = 0, 0, byte(0x80+r.IntN(64)), 0x3f+byte(r.IntN(2))*0x80
			}
		}
		fill(k)
		fill(v)
		p.Layers = append(p.Layers, store.Layer{K: k, V: v})
	}
	return p
}

// env is one versitygw with a bucket, and a Tier over it.
type env struct {
	srv    *s3test.Server
	bucket string
	tier   *Tier
}

func newEnv(t testing.TB, o Options) *env {
	t.Helper()
	srv := s3test.Start(t)
	e := &env{srv: srv, bucket: "kvstore-tier"}
	srv.CreateBucket(t, e.bucket)
	e.tier = e.open(t, o)
	return e
}

// open returns a Tier on e's bucket with o's settings (endpoint, bucket and
// credentials filled in where o leaves them empty).
func (e *env) open(t testing.TB, o Options) *Tier {
	t.Helper()
	if o.Endpoint == "" {
		o.Endpoint = e.srv.Endpoint
	}
	if o.Bucket == "" {
		o.Bucket = e.bucket
	}
	if o.Credentials == (Credentials{}) {
		o.Credentials = Credentials{AccessKey: e.srv.AccessKey, SecretKey: e.srv.SecretKey}
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 10 * time.Second
	}
	tr, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func openDB(t testing.TB, o *store.Options) *store.DB {
	t.Helper()
	db, err := store.Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// samePacket fails t unless got holds want's fields and tensors, byte for
// byte.
func samePacket(t testing.TB, got, want *store.Packet) {
	t.Helper()
	if got.Namespace != want.Namespace || got.Model.Fingerprint() != want.Model.Fingerprint() ||
		got.AdapterID != want.AdapterID || got.BasePosition != want.BasePosition || got.Codec != want.Codec ||
		got.HeaderTokens != want.HeaderTokens || got.TrailerTokens != want.TrailerTokens ||
		len(got.TokenIDs) != len(want.TokenIDs) || len(got.Layers) != len(want.Layers) {
		t.Fatalf("packet fields differ: got %+v\nwant %+v", got, want)
	}
	for i := range got.TokenIDs {
		if got.TokenIDs[i] != want.TokenIDs[i] {
			t.Fatalf("token %d: %d, want %d", i, got.TokenIDs[i], want.TokenIDs[i])
		}
	}
	for l := range got.Layers {
		if string(got.Layers[l].K) != string(want.Layers[l].K) || string(got.Layers[l].V) != string(want.Layers[l].V) {
			t.Fatalf("layer %d differs", l)
		}
	}
}

// sameView fails t unless view v serves want's tensors byte for byte.
func sameView(t testing.TB, v *store.View, want *store.Packet) {
	t.Helper()
	for l := range want.Layers {
		k, val, err := v.Layer(l)
		if err != nil {
			t.Fatal(err)
		}
		if string(k) != string(want.Layers[l].K) || string(val) != string(want.Layers[l].V) {
			t.Fatalf("layer %d: view differs from the packet put", l)
		}
	}
}

func packetID(p *store.Packet) format.PacketID {
	return format.ComputePacketID(p.Namespace, p.Model.Fingerprint(), p.AdapterID, p.TokenIDs)
}
