package store

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
)

// metaConfig is one option set of the metamorphic test.
type metaConfig struct {
	name     string
	disk     bool
	blobSize int64
	noCRC    bool
	noMmap   bool
}

var metaConfigs = []metaConfig{
	{name: "mem/small-blobs", blobSize: 16 << 10},
	{name: "mem/large-blobs/no-crc", blobSize: 4 << 20, noCRC: true},
	{name: "disk/mmap/small-blobs", disk: true, blobSize: 32 << 10},
	{name: "disk/copies/large-blobs", disk: true, blobSize: 1 << 20, noMmap: true},
}

// metaRun is one run of the random operations under one option set,
// compared with an in-memory model: live packets by id.
type metaRun struct {
	t     *testing.T
	cfg   metaConfig
	seed  uint64
	fs    vfs.FS
	dir   string
	db    *DB
	spec  *format.ModelSpec
	pool  []*Packet // packets the operations draw from
	want  []*Packet // what reading pool[k] back gives: its kept rows when pruned
	ids   []format.PacketID
	model map[format.PacketID]bool
	log   []string // what each operation returned: identical across option sets
	ops   map[string]int
}

func (r *metaRun) fatalf(i int, f string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("metamorphic %s seed %d op %d: %s", r.cfg.name, r.seed, i, fmt.Sprintf(f, args...))
}

func (r *metaRun) open(i int) {
	db, err := Open(r.dir, &Options{FS: r.fs, BlobFileSize: r.cfg.blobSize, DisableChecksums: r.cfg.noCRC,
		DisableMmap: r.cfg.noMmap, Logger: quiet})
	if err != nil {
		r.fatalf(i, "open: %v", err)
	}
	r.db = db
}

// TestReliabilityMetamorphic runs the same random operations (put, re-put,
// get, delete, list, assemble, compact, GC, reopen, crash) under several
// option sets: each run must agree with an in-memory model after every
// operation, and all runs must return identical results. A quarter of the
// packets are stored pruned (half their rows, compacted, positions bitmap)
// and a fifth under shuffle-zstd; reads must give their rows exactly.
func TestReliabilityMetamorphic(t *testing.T) {
	n := pick(400, 5000)
	for _, seed := range []uint64{1, 2} {
		var first *metaRun
		for _, cfg := range metaConfigs {
			r := runMeta(t, cfg, seed, n)
			t.Logf("seed %d %s: %d operations %v", seed, cfg.name, n, r.ops)
			if first == nil {
				first = r
				continue
			}
			for i := range first.log {
				if first.log[i] != r.log[i] {
					t.Fatalf("seed %d op %d: %s returned %q, %s %q", seed, i, first.cfg.name, first.log[i], cfg.name, r.log[i])
				}
			}
		}
	}
	t.Logf("metamorphic: %d operations x %d option sets x 2 seeds, all equal to the model and to each other", n, len(metaConfigs))
}

func runMeta(t *testing.T, cfg metaConfig, seed uint64, n int) *metaRun {
	r := &metaRun{t: t, cfg: cfg, seed: seed, spec: testSpec(format.DTypeBF16, 2, 2, 8),
		model: map[format.PacketID]bool{}, ops: map[string]int{}}
	if cfg.disk {
		r.fs, r.dir = vfs.Default, t.TempDir()
	} else {
		r.fs, r.dir = vfs.NewCrashableMem(), "/db"
	}
	fp := r.spec.Fingerprint()
	for i := range 40 {
		p := floatPacket(r.spec, "ns", 3+(i*37)%150, 0, 0, seed*1000+uint64(i))
		want := p
		if i%5 == 2 {
			p.Codec = format.CodecShuffleZstd // lossless: reads stay exact
		}
		if i%4 == 1 { // pruned to half its rows, stored compacted
			keep, err := prune.Random(r.spec.Layers, r.spec.KVHeads, p.Tokens(), p.Tokens()/2, seed+uint64(i))
			if err != nil {
				t.Fatal(err)
			}
			p.Keep, want = keep, keptPacket(p, keep)
		}
		r.pool, r.want = append(r.pool, p), append(r.want, want)
		r.ids = append(r.ids, format.ComputePacketID("ns", fp, "", p.TokenIDs))
	}
	r.open(-1)
	defer func() { r.db.Close() }()
	rng := rand.New(rand.NewPCG(seed, 99))
	for i := range n {
		r.step(i, rng)
	}
	r.checkModel(n)
	return r
}

// step runs one random operation.
func (r *metaRun) step(i int, rng *rand.Rand) {
	fp := r.spec.Fingerprint()
	k := rng.IntN(len(r.pool))
	p, id := r.pool[k], r.ids[k]
	var res string
	switch x := rng.IntN(100); {
	case x < 30:
		r.ops["put"]++
		if _, err := r.db.Put(context.Background(), p); err != nil {
			r.fatalf(i, "put %d: %v", k, err)
		}
		r.model[id] = true
		res = "put"
	case x < 55:
		r.ops["get"]++
		out, err := readBack(r.db, r.want[k], id)
		want := readAbsent
		if r.model[id] {
			want = readExact
		}
		if out != want {
			r.fatalf(i, "get %d: %v (%v), model says %v", k, out, err, want)
		}
		res = out.String()
	case x < 70:
		r.ops["delete"]++
		err := r.db.Delete(context.Background(), "ns", fp, id)
		if r.model[id] != (err == nil) || (err != nil && !errors.Is(err, ErrNotFound)) {
			r.fatalf(i, "delete %d: %v, model has it: %v", k, err, r.model[id])
		}
		delete(r.model, id)
		res = fmt.Sprint(err == nil)
	case x < 78:
		r.ops["list"]++
		res = r.list(i)
	case x < 88:
		r.ops["assemble"]++
		res = r.assemble(i, rng)
	case x < 92:
		r.ops["compact"]++
		if _, err := r.db.Compact(context.Background(), CompactOptions{LiveRatio: rng.Float64()}); err != nil {
			r.fatalf(i, "compact: %v", err)
		}
		if _, err := r.db.GC(context.Background(), GCOptions{}); err != nil {
			r.fatalf(i, "gc: %v", err)
		}
	case x < 96:
		r.ops["reopen"]++
		if err := r.db.Close(); err != nil {
			r.fatalf(i, "close: %v", err)
		}
		r.open(i)
	default:
		r.ops["crash"]++
		r.crash(i, rng)
	}
	r.log = append(r.log, res)
}

// list compares List's pages with the model.
func (r *metaRun) list(i int) string {
	var got []format.PacketID
	var cursor []byte
	for {
		ids, next, err := r.db.List("ns", r.spec.Fingerprint(), cursor, 7)
		if err != nil {
			r.fatalf(i, "list: %v", err)
		}
		got = append(got, ids...)
		if next == nil {
			break
		}
		cursor = next
	}
	var want []format.PacketID
	for id := range r.model {
		want = append(want, id)
	}
	cmp := func(a, b format.PacketID) int { return slices.Compare(a[:], b[:]) }
	slices.SortFunc(want, cmp)
	if !slices.Equal(got, want) {
		r.fatalf(i, "list: %d ids, model has %d", len(got), len(want))
	}
	return fmt.Sprint(len(got))
}

// assemble assembles up to three live packets at random offsets: V rows
// must be the packets' own, and the whole result (K rotated) is returned
// as a checksum for the comparison across option sets.
func (r *metaRun) assemble(i int, rng *rand.Rand) string {
	var items []AssembleItem
	var ps []*Packet
	tokens := 0
	for k, id := range r.ids {
		if r.model[id] && len(items) < 3 && rng.IntN(3) == 0 {
			items = append(items, AssembleItem{ID: id, Offset: int64(tokens + rng.IntN(50))})
			ps = append(ps, r.want[k])
			tokens += rowsOf(r.want[k])
		}
	}
	if len(items) == 0 {
		return "none"
	}
	d := NewContiguousDest(r.spec, tokens)
	if err := r.db.Assemble(context.Background(), "ns", r.spec.Fingerprint(), items, d, nil); err != nil {
		r.fatalf(i, "assemble: %v", err)
	}
	row := r.spec.HeadDim * r.spec.DType.Size()
	crc := crc32.NewIEEE()
	for l := range r.spec.Layers {
		at := 0
		for h := range r.spec.KVHeads {
			for _, p := range ps {
				n := rowsOf(p) * row
				src := p.Layers[l].V[h*n : (h+1)*n]
				if string(d.V[l][at:at+n]) != string(src) {
					r.fatalf(i, "assemble: layer %d head %d V rows differ from the packet's", l, h)
				}
				at += n
			}
		}
		crc.Write(d.K[l])
		crc.Write(d.V[l])
	}
	return fmt.Sprintf("%08x", crc.Sum32())
}

// keptPacket is p with only the rows keep keeps, [kv_heads][k][head_dim]
// per chunk: what View.Layer returns for p stored pruned.
func keptPacket(p *Packet, keep *prune.Set) *Packet {
	q := *p
	q.Keep, q.Layers = nil, make([]Layer, len(p.Layers))
	row := p.Model.HeadDim * p.Model.DType.Size()
	n := p.Tokens()
	for l, layer := range p.Layers {
		for _, kv := range []struct {
			dst *[]byte
			src []byte
		}{{&q.Layers[l].K, layer.K}, {&q.Layers[l].V, layer.V}} {
			for h := range p.Model.KVHeads {
				for _, t := range keep.Kept(l, h) {
					at := (h*n + int(t)) * row
					*kv.dst = append(*kv.dst, kv.src[at:at+row]...)
				}
			}
		}
	}
	return &q
}

// rowsOf is the rows per (layer, KV head) of a packet built by keptPacket
// or whole.
func rowsOf(p *Packet) int {
	return len(p.Layers[0].K) / (p.Model.KVHeads * p.Model.HeadDim * p.Model.DType.Size())
}

// crash clones a crashable MemFS as a crash would leave it (a random share
// of unsynced data kept) and continues on the clone; on disk it reopens.
// Every operation the model holds was synced, so nothing changes.
func (r *metaRun) crash(i int, rng *rand.Rand) {
	pct, crashSeed := rng.IntN(101), rng.Uint64() // drawn on disk too: the runs stay in step
	mem, ok := r.fs.(*vfs.MemFS)
	var clone *vfs.MemFS
	if ok {
		clone = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(crashSeed, 0))})
	}
	_ = r.db.Close()
	if ok {
		r.fs = clone
	}
	r.open(i)
	r.checkModel(i)
}

// checkModel reads every packet of the pool and runs Check.
func (r *metaRun) checkModel(i int) {
	for k, p := range r.want {
		out, err := readBack(r.db, p, r.ids[k])
		if want := map[bool]readOutcome{true: readExact, false: readAbsent}[r.model[r.ids[k]]]; out != want {
			r.fatalf(i, "packet %d: %v (%v), model says %v", k, out, err, want)
		}
	}
	rep, err := r.db.Check(context.Background(), CheckOptions{})
	if err != nil || !rep.OK() {
		r.fatalf(i, "Check = %v, findings %v", err, rep.Findings)
	}
}
