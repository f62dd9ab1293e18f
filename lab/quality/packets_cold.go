package quality

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/bench"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store"
)

// Cold load of a compressed, pruned setting against raw (the compression
// target: at least 2x raw).
//
// ColdLoad prefills cfg's context, stores Copies copies of its packet (each
// with other token ids, so other packet ids) raw and under the setting, in
// a store on disk under Dir, and then, Rounds times, for each of the two in
// an order that alternates between rounds: drops the store's page cache
// (bench.DropCache: fsync and posix_fadvise(DONTNEED)), reopens the store
// and assembles all copies in one store.Assemble (CRCs checked, decoded,
// keys re-rotated to their offsets), timed from the call to its return,
// as store's BenchmarkAssembleCold times it (the Open, the same for both,
// is not counted). A pruned copy delivers only its kept rows; the ratio
// compares the time to have each document ready for attention, which is
// what a pruned, compressed packet stands in for.

// ColdConfig is one ColdLoad measurement.
type ColdConfig struct {
	Packet PacketConfig // model, text, context; Codecs[0] and Options are the setting's codec
	// Policy and Keep prune the setting (PolicyNone or Keep 1: whole;
	// PolicyMass: Keep is the share, Packet.MassMin the floor).
	Policy string
	Keep   float64
	Copies int    // packets per side (0: 128)
	Rounds int    // (0: 5)
	Dir    string // parent of the store's directory ("": os.TempDir(); must be a disk, not tmpfs)
}

// ColdResult is the outcome: per round, the wall time of each side.
type ColdResult struct {
	RawBytes, StoredBytes int // all copies, raw bf16 and the setting's stored chunks
	Raw, Setting          []time.Duration
}

// Ratio is the median over rounds of raw's time over the setting's.
func (r *ColdResult) Ratio() float64 {
	q := make([]float64, len(r.Raw))
	for i := range q {
		q[i] = r.Raw[i].Seconds() / r.Setting[i].Seconds()
	}
	slices.Sort(q)
	return q[len(q)/2]
}

// ColdLoad runs the measurement described above.
func ColdLoad(cc ColdConfig) (*ColdResult, error) {
	cfg := cc.Packet
	cfg.ensureDefaults()
	if cc.Copies == 0 {
		cc.Copies = 128
	}
	if cc.Rounds == 0 {
		cc.Rounds = 5
	}
	m, n := cfg.Model, cfg.Context
	if m == nil || n < 2*anchorRows || len(cfg.Codecs) == 0 {
		return nil, fmt.Errorf("%w: quality: cold load: model %v, context %d, %d codecs", format.ErrInvalidArgument, m != nil, n, len(cfg.Codecs))
	}
	toks, err := text(m, cfg.Text, cfg.BOS, n, cfg.Seed)
	if err != nil {
		return nil, err
	}
	pre, err := m.Forward(toks, 0, nil, llama.ForwardOptions{Attention: true})
	if err != nil {
		return nil, err
	}
	var keep *prune.Set
	if cc.Policy != PolicyNone && cc.Keep < 1 {
		kc := &PacketConfig{Keeps: []float64{cc.Keep}, Policies: []string{cc.Policy}, Seed: cfg.Seed, TOVAQueries: cfg.TOVAQueries}
		if cc.Policy == PolicyMass {
			kc.Keeps, kc.Policies, kc.Mass, kc.MassMin = nil, nil, []float64{cc.Keep}, cfg.MassMin
		}
		sets, err := keepSets(m, pre.Attention, n, kc)
		if err != nil {
			return nil, err
		}
		for _, s := range sets {
			if s.policy == cc.Policy {
				keep = s.set
			}
		}
		if keep == nil {
			return nil, fmt.Errorf("%w: quality: cold load: unknown policy %q", format.ErrInvalidArgument, cc.Policy)
		}
	}
	dir, err := os.MkdirTemp(cc.Dir, "kvstore-cold")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ps, err := newPacketStoreAt(m, pre.Cache, toks, cfg.DType, dir)
	if err != nil {
		return nil, err
	}
	res := &ColdResult{}
	items := map[string][]store.AssembleItem{}
	for _, side := range []struct {
		ns    string
		codec format.Codec
		keep  *prune.Set
	}{{"raw", format.CodecRaw, nil}, {"setting", cfg.Codecs[0], keep}} {
		for i := range cc.Copies {
			p := ps.base
			p.TokenIDs = slices.Clone(p.TokenIDs)
			p.TokenIDs[0] = uint32(1<<20 + i) // another document id per copy
			p.Namespace, p.Codec, p.CodecOptions, p.Keep = side.ns, side.codec, cfg.Options, side.keep
			id, err := ps.db.Put(context.Background(), &p)
			if err != nil {
				ps.db.Close()
				return nil, err
			}
			b, err := ps.storedBytes(side.ns, id)
			if err != nil {
				ps.db.Close()
				return nil, err
			}
			if side.ns == "raw" {
				res.RawBytes += b
			} else {
				res.StoredBytes += b
			}
			items[side.ns] = append(items[side.ns], store.AssembleItem{ID: id, Offset: int64(i * n)})
		}
	}
	spec := ps.spec
	if err := ps.db.Close(); err != nil {
		return nil, err
	}
	for r := range cc.Rounds {
		order := []string{"raw", "setting"}
		if r%2 == 1 {
			order = []string{"setting", "raw"}
		}
		for _, ns := range order {
			d, err := coldAssemble(dir, spec, ns, items[ns])
			if err != nil {
				return nil, fmt.Errorf("quality: cold load %s: %w", ns, err)
			}
			if ns == "raw" {
				res.Raw = append(res.Raw, d)
			} else {
				res.Setting = append(res.Setting, d)
			}
		}
	}
	return res, nil
}

// coldAssemble drops dir's page cache, opens the store, and times one
// Assemble of items into a fresh destination.
func coldAssemble(dir string, spec *format.ModelSpec, ns string, items []store.AssembleItem) (time.Duration, error) {
	if err := bench.DropCache(dir); err != nil {
		return 0, err
	}
	db, err := store.Open(dir, &store.Options{FS: vfs.Default})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	t0 := time.Now()
	a, err := db.PrepareAssemblePruned(context.Background(), ns, spec.Fingerprint(), items, make([]*prune.Set, len(items)))
	if err != nil {
		return 0, err
	}
	defer a.Release()
	if err := a.Run(context.Background(), store.NewContiguousDest(spec, a.Tokens()), nil); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}
