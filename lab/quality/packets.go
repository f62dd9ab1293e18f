package quality

import (
	"cmp"
	"context"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store"
)

// Compressed and pruned packets.
//
// RunPackets prefills a sampled context of N tokens with full attention
// (f32), keeps its cache as one packet in a store (in memory) under each
// codec setting (each in a namespace of its own; low-rank settings get the
// model's RoPE), in the storage dtype (bf16 by default), and, for each
// policy at each kept fraction, stores it again pruned (store.Packet.Keep:
// only the kept rows, compacted, and their positions) and assembles it
// back with store.Assemble. The held-out continuation's T tokens are
// then decoded one at a time with teacher forcing, each attending over the
// assembled rows of every (layer, KV head) and the continuation so far
// (the decode loop of decode.go), and the next-token distributions are
// compared with full recompute: the same loop over the f32 cache, which is
// Forward bit for bit. The raw row of each dtype is the cost of the dtype
// alone.
//
// Bytes per token are the stored bytes of the packet's chunks, as its
// header in the store records them (scales and offsets included; a chunk
// the codec would not make smaller is stored raw), over its N tokens; a
// pruned packet's include its positions chunk (a bitmap of the kept
// local positions, one bit per context row per (layer, KV head), padded;
// docs/format.md "Pruned packets"). The codecs see a pruned packet's compacted rows: the
// int8/int4 key groups span kept rows only, and the low-rank codec
// un-rotates kept keys at rows 0..k-1 rather than at their positions
// (store/internal/packet), which costs it rank.

// Policy names of PacketRow.
const (
	PolicyNone    = "none"
	PolicyRandom  = "random"
	PolicyTOVA    = "tova"
	PolicyAnchors = "anchors+tova"
	// PolicyMass keeps per packet the rows prune.MassKeep asks of TOVA's
	// scores: its rows' Keep is the mass share, Kept the fraction kept.
	PolicyMass = "tova-mass"
	// PolicyWindow keeps the first anchorRows tokens and the most recent
	// (StreamingLLM); PolicySnapKV is prune.SnapKV with its observation
	// window (TOVAQueries rows) kept and a pooling kernel of 7.
	PolicyWindow = "window"
	PolicySnapKV = "snapkv"
	// PolicyHybrid keeps the first anchorRows tokens and the most recent
	// PacketConfig.HybridRecent of the budget, and fills the rest by
	// TOVA's votes: the recent lines the next bytes lean on and the far
	// rows the last queries attend to.
	PolicyHybrid = "window+tova"
	snapKVKernel = 7
	// anchorRows is how many first tokens keep-anchors always keeps.
	anchorRows = 4
	// DefaultTOVAQueries is TOVA's observation window: the attention of
	// the last 32 context queries, summed (as SnapKV's window). On
	// stories260K at 75% kept it gave 0.23 nats against 2.3 for the last
	// query alone (1), 0.33 for 16, 0.22 for 64, 0.43 for 128.
	DefaultTOVAQueries = 32
)

// PacketConfig is one measurement of RunPackets.
type PacketConfig struct {
	Name                  string
	Model                 *llama.Model
	Context, Continuation int
	BOS                   int
	Seed                  uint64
	// Text is as Config.Text: real text instead of a sample, when it has
	// at least Context+Continuation tokens.
	Text []int
	// DType is the packet's storage dtype (0: bf16).
	DType format.DType
	// Codecs (nil: raw, shuffle-zstd, int8, int4) and Keeps, the kept
	// fractions of the pruning sweep (nil: 0.75, 0.5, 0.25); every codec
	// is also measured unpruned. Options are those of Codecs.
	Codecs  []format.Codec
	Keeps   []float64
	Options codec.Options
	// LowRank are settings of the low-rank codec measured after Codecs,
	// each named by LowRankName (nil: none). Their RoPE is the model's.
	LowRank []codec.Options
	// TOVAQueries is how many last context queries TOVA sums (0:
	// DefaultTOVAQueries; 1 is TOVA proper).
	TOVAQueries int
	// Policies are the fixed-fraction policies measured at each of Keeps
	// (nil: PolicyRandom, PolicyTOVA, PolicyAnchors).
	Policies []string
	// Mass are the shares of PolicyMass measured (nil: none), each with
	// at least MassMin of the tokens kept (0: one row).
	Mass    []float64
	MassMin float64
	// HybridRecent is the share of PolicyHybrid's budget kept as the
	// most recent rows (0: one half).
	HybridRecent float64
	// Check are the KL bounds of PolicyCheck measured (nil: none), with
	// its probe's length (0: DefaultCheckProbe) and the fractions it tries
	// (nil: DefaultCheckLadder).
	Check       []float64
	CheckProbe  int
	CheckLadder []float64
	// Observe, when positive, prefills the context in two calls, the
	// second its last Observe tokens with their attention (TOVA's votes:
	// at least TOVAQueries), rather than one call's N x N attention.
	Observe int
}

// PacketRow is one (codec setting, policy, kept fraction).
type PacketRow struct {
	Codec format.Codec
	// Setting names the codec and its options in the tables: the codec's
	// name, or LowRankName's.
	Setting string
	Policy  string
	// Keep is the kept fraction asked (PolicyMass: the mass share), Kept
	// the fraction of the context's rows each (layer, KV head) kept.
	Keep, Kept float64
	// BytesPerToken is stored bytes over context tokens; OfBF16 the same
	// over the bf16 bytes of a token's K and V in every layer.
	BytesPerToken, OfBF16 float64
	// KL is the mean KL(p_full || p_packet) over the continuation in nats,
	// MaxKL the largest step's; Top1 the share of steps whose argmax
	// matches full recompute's.
	KL, MaxKL, Top1 float64
}

// PacketReport is RunPackets' result.
type PacketReport struct {
	Name                     string
	Layers, KVHeads, HeadDim int
	Context, Continuation    int
	DType                    format.DType
	Rows                     []PacketRow
}

func (c *PacketConfig) ensureDefaults() {
	if c.DType == 0 {
		c.DType = format.DTypeBF16
	}
	if c.Codecs == nil {
		c.Codecs = []format.Codec{format.CodecRaw, format.CodecShuffleZstd, format.CodecInt8, format.CodecInt4}
	}
	if c.Keeps == nil {
		c.Keeps = []float64{0.75, 0.5, 0.25}
	}
	if c.TOVAQueries == 0 {
		c.TOVAQueries = DefaultTOVAQueries
	}
	if c.Policies == nil {
		c.Policies = []string{PolicyRandom, PolicyTOVA, PolicyAnchors}
	}
}

// RunPackets measures every codec unpruned and under every policy and kept
// fraction (see the comment above).
func RunPackets(cfg PacketConfig) (*PacketReport, error) {
	cfg.ensureDefaults()
	m, n := cfg.Model, cfg.Context
	if m == nil || n < 2*anchorRows || cfg.Continuation < 1 {
		return nil, fmt.Errorf("%w: quality: packets: model %v, context %d, continuation %d", format.ErrInvalidArgument, m != nil, n, cfg.Continuation)
	}
	toks, err := text(m, cfg.Text, cfg.BOS, n+cfg.Continuation, cfg.Seed)
	if err != nil {
		return nil, err
	}
	ctx, cont := toks[:n], toks[n:]
	cache, att, err := prefill(m, ctx, cfg.Observe)
	if err != nil {
		return nil, err
	}
	full, err := decode(m, keepRows(cache, allTokens(n)), cont, n)
	if err != nil {
		return nil, err
	}
	pk, err := newPacketStore(m, cache, ctx, cfg.DType)
	if err != nil {
		return nil, err
	}
	defer pk.db.Close()
	sets, err := keepSets(m, att, n, &cfg)
	if err != nil {
		return nil, err
	}
	rep := &PacketReport{Name: cfg.Name, Layers: m.Layers, KVHeads: m.KVHeads, HeadDim: m.HeadDim(), Context: n, Continuation: len(cont), DType: cfg.DType}
	for _, c := range settings(&cfg, pk.spec) {
		id, err := pk.put(c)
		if err != nil {
			return nil, fmt.Errorf("quality: packets: put %s: %w", c.name, err)
		}
		for _, s := range sets {
			row, err := pk.measure(id, c, s, cont, full)
			if err != nil {
				return nil, fmt.Errorf("quality: packets: %s %s %v: %w", c.name, s.policy, s.keep, err)
			}
			rep.Rows = append(rep.Rows, row)
		}
		if len(cfg.Check) > 0 {
			rows, err := checkRows(&cfg, cache, ctx, cont, full, pk, id, c)
			if err != nil {
				return nil, fmt.Errorf("quality: packets: %s %s: %w", c.name, PolicyCheck, err)
			}
			rep.Rows = append(rep.Rows, rows...)
		}
	}
	return rep, nil
}

// setting is one codec with its options, under its table name (also its
// namespace in the store).
type setting struct {
	name  string
	codec format.Codec
	opts  codec.Options
}

// settings lists cfg's Codecs, then its LowRank settings with spec's RoPE.
func settings(cfg *PacketConfig, spec *format.ModelSpec) []setting {
	var out []setting
	for _, c := range cfg.Codecs {
		out = append(out, setting{name: c.String(), codec: c, opts: cfg.Options})
	}
	for _, o := range cfg.LowRank {
		o.RoPE = &spec.RoPE
		out = append(out, setting{name: LowRankName(o), codec: format.CodecLowRank, opts: o})
	}
	return out
}

// LowRankName names a low-rank setting: "lowrank r16" for a fixed rank,
// "lowrank e0.999" for an energy (the codec's default when 0), with the
// factor dtype appended when it is not f16.
func LowRankName(o codec.Options) string {
	name := fmt.Sprintf("lowrank r%d", o.Rank)
	if o.Rank == 0 {
		name = fmt.Sprintf("lowrank e%g", cmp.Or(o.Energy, codec.DefaultEnergy))
	}
	if o.FactorDType != 0 && o.FactorDType != format.DTypeF16 {
		name += " " + o.FactorDType.String()
	}
	return name
}

// prefill runs ctx through m with full attention and returns its cache
// and the attention probabilities of its last queries: all of them when
// observe is 0, else the last observe (prefilled in a second call).
func prefill(m *llama.Model, ctx []int, observe int) (*llama.Cache, [][][][]float32, error) {
	n := len(ctx)
	if observe <= 0 || observe >= n {
		pre, err := m.Forward(ctx, 0, nil, llama.ForwardOptions{Attention: true})
		if err != nil {
			return nil, nil, err
		}
		return pre.Cache, pre.Attention, nil
	}
	pre, err := m.Forward(ctx[:n-observe], 0, nil, llama.ForwardOptions{})
	if err != nil {
		return nil, nil, err
	}
	obs, err := m.Forward(ctx[n-observe:], int64(n-observe), pre.Cache, llama.ForwardOptions{Attention: true})
	if err != nil {
		return nil, nil, err
	}
	return obs.Cache, obs.Attention, nil
}

// keepSet is one pruning of the sweep (set nil: none); kept is the rows
// kept per (layer, KV head).
type keepSet struct {
	policy string
	keep   float64
	kept   int
	set    *prune.Set
}

// keepSets returns no pruning, then every policy at every kept fraction,
// then PolicyMass at every share.
func keepSets(m *llama.Model, att [][][][]float32, n int, cfg *PacketConfig) ([]keepSet, error) {
	out := []keepSet{{policy: PolicyNone, keep: 1, kept: n}}
	tova, err := prune.TOVAScores(att, m.KVHeads, n, cfg.TOVAQueries)
	if err != nil {
		return nil, err
	}
	for _, f := range cfg.Keeps {
		k := prune.Budget(n, f)
		for _, name := range cfg.Policies {
			var scores [][]float32
			var anchors []int
			switch name {
			case PolicyRandom:
				scores = prune.RandomScores(m.Layers, m.KVHeads, n, cfg.Seed)
			case PolicyTOVA:
				scores = tova
			case PolicyAnchors:
				scores, anchors = tova, prune.FirstAnchors(n, anchorRows, 0)
			case PolicyHybrid:
				scores, anchors = tova, prune.FirstAnchors(n, anchorRows, int(cmp.Or(cfg.HybridRecent, 0.5)*float64(k)))
			case PolicyWindow:
				scores, anchors = prune.WindowScores(m.Layers, m.KVHeads, n), prune.FirstAnchors(n, anchorRows, 0)
			case PolicySnapKV:
				if scores, err = prune.SnapKVScores(att, m.KVHeads, n, cfg.TOVAQueries, snapKVKernel); err != nil {
					return nil, err
				}
				for t := n - 1; t >= n-min(cfg.TOVAQueries, k); t-- {
					anchors = append(anchors, t)
				}
			default:
				return nil, fmt.Errorf("%w: quality: packets: policy %q", format.ErrInvalidArgument, name)
			}
			s, err := prune.Select(m.Layers, m.KVHeads, n, scores, k, anchors)
			if err != nil {
				return nil, err
			}
			out = append(out, keepSet{policy: name, keep: f, kept: k, set: s})
		}
	}
	for _, share := range cfg.Mass {
		s, k, err := prune.Mass(m.Layers, m.KVHeads, n, tova, share, prune.Budget(n, max(cfg.MassMin, 1/float64(n))), nil)
		if err != nil {
			return nil, err
		}
		if k == n {
			s = nil // every row: stored whole
		}
		out = append(out, keepSet{policy: PolicyMass, keep: share, kept: k, set: s})
	}
	return out, nil
}

// packetStore is the context's cache as a packet, and a store to keep it.
type packetStore struct {
	m    *llama.Model
	db   *store.DB
	spec *format.ModelSpec
	base store.Packet // the context's packet, raw, in the storage dtype
	n    int
}

func newPacketStore(m *llama.Model, c *llama.Cache, ctx []int, dt format.DType) (*packetStore, error) {
	db, err := store.Open("/packets", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		return nil, err
	}
	return newPacketStoreIn(db, m, c, ctx, dt)
}

// newPacketStoreAt is newPacketStore on disk, in dir.
func newPacketStoreAt(m *llama.Model, c *llama.Cache, ctx []int, dt format.DType, dir string) (*packetStore, error) {
	db, err := store.Open(dir, &store.Options{FS: vfs.Default})
	if err != nil {
		return nil, err
	}
	return newPacketStoreIn(db, m, c, ctx, dt)
}

func newPacketStoreIn(db *store.DB, m *llama.Model, c *llama.Cache, ctx []int, dt format.DType) (*packetStore, error) {
	ps := &packetStore{m: m, db: db, spec: m.Spec(dt, "quality"), n: len(ctx)}
	ps.base = store.Packet{PacketDesc: format.PacketDesc{Model: ps.spec, TokenIDs: make([]uint32, len(ctx))}}
	for i, t := range ctx {
		ps.base.TokenIDs[i] = uint32(t)
	}
	for _, kv := range c.Layers {
		var l store.Layer
		for _, x := range []struct {
			dst *[]byte
			src []float32
		}{{&l.K, kv.K}, {&l.V, kv.V}} {
			*x.dst = make([]byte, len(x.src)*dt.Size())
			if err := format.FromF32(*x.dst, x.src, dt); err != nil {
				db.Close()
				return nil, err
			}
		}
		ps.base.Layers = append(ps.base.Layers, l)
	}
	return ps, nil
}

// put stores the packet under setting c, in a namespace of its own.
func (ps *packetStore) put(c setting) (format.PacketID, error) {
	p := ps.base
	p.Namespace, p.Codec, p.CodecOptions = c.name, c.codec, c.opts
	return ps.db.Put(context.Background(), &p)
}

// measure stores the packet under setting c pruned by s (Packet.Keep: the
// store keeps only the kept rows and their positions; whole when s keeps
// everything, then id is the packet already stored under c), assembles it
// back, decodes the continuation over it and scores it against full.
// Bytes per token are the stored chunks' lengths from the store's header,
// the positions chunk of a pruned packet included.
func (ps *packetStore) measure(id format.PacketID, c setting, s keepSet, cont []int, full [][]float32) (PacketRow, error) {
	row := PacketRow{Codec: c.codec, Setting: c.name, Policy: s.policy, Keep: s.keep, Kept: float64(s.kept) / float64(ps.n)}
	ns := c.name
	if s.set != nil {
		ns = fmt.Sprintf("%s/%s/%g", c.name, s.policy, s.keep)
		p := ps.base
		p.Namespace, p.Codec, p.CodecOptions, p.Keep = ns, c.codec, c.opts, s.set
		var err error
		if id, err = ps.db.Put(context.Background(), &p); err != nil {
			return row, err
		}
	}
	bytes, err := ps.storedBytes(ns, id)
	if err != nil {
		return row, err
	}
	m := ps.spec
	row.BytesPerToken = float64(bytes) / float64(ps.n)
	row.OfBF16 = row.BytesPerToken / float64(2*m.Layers*m.KVHeads*m.HeadDim*2)
	sets, err := ps.assemble(id, ns, nil)
	if err != nil {
		return row, err
	}
	logits, err := decodeWith(ps, sets, cont)
	if err != nil {
		return row, err
	}
	sc := score(full, logits)
	row.KL, row.Top1 = sc.KL, sc.Top1
	for i := range full {
		row.MaxKL = math.Max(row.MaxKL, llama.LogitsKL(full[i], logits[i]))
	}
	return row, nil
}

// decodeWith runs the continuation over fixed context rows.
func decodeWith(ps *packetStore, sets [][]rowSet, cont []int) ([][]float32, error) {
	return decode(ps.m, &fixedRows{sets: sets}, cont, ps.n)
}
