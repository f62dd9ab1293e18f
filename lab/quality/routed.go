package quality

import (
	"fmt"
	"math"
	"slices"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/router"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store"
)

// Span memory with other routers than the untrained ones: trained routers
// read from the store's router artifacts (LongConfig.Routers), and the
// oracle that zooms by the teacher's true attention mass (LongConfig.Oracle),
// the ceiling of routing alone.
const (
	MethodSpanTrained    = "span+trained"
	MethodSpanTrainedSum = "span+trained+sum"
	MethodSpanOracle     = "span+oracle"
	// MethodSpanTrainedWindow is span+trained with the context's last
	// rows resident, WindowShare of the budget, counted in it.
	MethodSpanTrainedWindow = "span+trained+window"
)

// WindowShare is MethodSpanTrainedWindow's recent window, a fraction of
// the budget's rows.
const WindowShare = 0.25

// ErrSpanBuild marks a context whose span memory could not be built (an
// SVD that did not converge), as RouterData returns it.
var ErrSpanBuild = errSpanBuild

// teacher is full attention over a prefilled context, for the zoom
// targets and the oracle: per decode step and layer, each span's share of
// the attention of the query heads of each KV head.
type teacher struct {
	m      *llama.Model
	cache  *llama.Cache
	meta   *store.SpanMeta
	recent [][]float32 // per layer, the decoded rows' keys so far, [rows][KVHeads*hd]
}

func newTeacher(m *llama.Model, c *llama.Cache, meta *store.SpanMeta) *teacher {
	return &teacher{m: m, cache: c, meta: meta, recent: make([][]float32, m.Layers)}
}

// keep records a's own key, which the teacher's later steps attend to.
func (t *teacher) keep(a *llama.StepAttention) {
	t.recent[a.Layer] = append(t.recent[a.Layer], a.K...)
}

// mass records a's own key (keep) and returns, per KV head of a's layer, each
// span's attention mass: softmax over the context rows, the decoded rows
// and the token's own (as full attention has them), summed over the
// span's rows and averaged over the KV head's query heads.
func (t *teacher) mass(a *llama.StepAttention) [][]float64 {
	m, hd, n := t.m, t.m.HeadDim(), t.cache.Len()
	t.keep(a)
	rec := t.recent[a.Layer]
	nr := len(rec) / (m.KVHeads * hd)
	per := m.Heads / m.KVHeads
	kv := t.cache.Layers[a.Layer]
	out := make([][]float64, m.KVHeads)
	logit := make([]float64, n+nr)
	scale := 1 / math.Sqrt(float64(hd))
	for g := range m.KVHeads {
		out[g] = make([]float64, len(t.meta.Spans))
		for h := g * per; h < (g+1)*per; h++ {
			q := a.Q[h*hd : (h+1)*hd]
			mx := math.Inf(-1)
			for r := range logit {
				var k []float32
				if r < n {
					k = kv.K[(g*n+r)*hd : (g*n+r+1)*hd]
				} else {
					k = rec[((r-n)*m.KVHeads+g)*hd : ((r-n)*m.KVHeads+g+1)*hd]
				}
				var s float64
				for j, v := range q {
					s += float64(v) * float64(k[j])
				}
				logit[r] = s * scale
				mx = max(mx, logit[r])
			}
			var z float64
			for r, l := range logit {
				logit[r] = math.Exp(l - mx)
				z += logit[r]
			}
			for sp, info := range t.meta.Spans {
				var s float64
				for r := info.Start; r < info.End; r++ {
					s += logit[r]
				}
				out[g][sp] += s / z / float64(per)
			}
		}
	}
	return out
}

// oracleSpan is span memory zoomed by the teacher's attention mass in
// place of a router's scores, within the same budget and costs.
type oracleSpan struct {
	*spanMethod
	t *teacher
}

func (o *oracleSpan) rows(a *llama.StepAttention) ([]rowSet, error) {
	sm := o.spanMethod
	meta := sm.s.meta
	mass := o.t.mass(a)
	z := &reconstruct.ZoomSet{Spans: make([][]int, meta.Layers*meta.KVHeads)}
	if sm.zoom > 0 {
		scores := make([][]float32, meta.Layers*meta.KVHeads)
		for g := range scores {
			scores[g] = make([]float32, len(meta.Spans))
			for sp := range scores[g] {
				scores[g][sp] = float32(math.NaN())
				if g/meta.KVHeads == a.Layer && sm.s.zoomable(sp) {
					scores[g][sp] = float32(mass[g%meta.KVHeads][sp])
				}
			}
		}
		var err error
		if z, err = reconstruct.Select(scores, make([]float32, len(scores)), sm.rt.SpanTokens, nil,
			reconstruct.Budget{Tokens: sm.zoom, Fill: true}); err != nil {
			return nil, err
		}
	}
	return sm.zoomedRows(a.Layer, a.Pos, z, nil)
}

// zoomedRows is rows's second half: the zoomer rebuilds the zoom set z
// (queries, when not nil, the layer's pre-RoPE queries per group, for a
// device zoomer's lookahead), then each KV head's rows for z, with the
// budget's statistics.
func (sm *spanMethod) zoomedRows(layer int, pos int64, z *reconstruct.ZoomSet, queries [][]float32) ([]rowSet, error) {
	if err := sm.zoomer.zoom(layer, pos, z, queries); err != nil {
		return nil, err
	}
	meta := sm.s.meta
	out := make([]rowSet, meta.KVHeads)
	before := sm.stats.rows
	defer func() { sm.stats.maxRows = max(sm.stats.maxRows, (sm.stats.rows-before)/float64(meta.KVHeads)) }()
	for g := range out {
		gi := layer*meta.KVHeads + g
		if sm.heads != nil && !sm.heads[gi] {
			continue
		}
		rs, err := sm.groupRows(layer, g, z.Spans[gi])
		if err != nil {
			return nil, err
		}
		out[g] = rs
		sm.stats.steps++
		sm.stats.rows += sm.fixedRows
		for _, sp := range z.Spans[gi] {
			sm.stats.rows += float64(sm.rt.SpanTokens[sp])
			sm.stats.bytes += float64(sm.rt.SpanBytes[gi][sp])
			sm.stats.spans++
		}
	}
	return out, nil
}

// trainedRouting stores the router artifacts in s's store for its model
// and returns the routing its reader then builds (the trained W, bias and
// tau, keys re-projected). The artifacts are stored under the memory's own
// spec (rowSpec): routers trained on the model's f32 rows route its bf16
// memories too, the rows' dtype being how they are stored, not what the
// model computes.
func (s *spanStore) trainedRouting(m *llama.Model, cfg *Config, arts []router.Artifact) (*store.Routing, error) {
	fp := rowSpec(m, cfg).Fingerprint()
	for _, a := range arts {
		if err := s.db.PutArtifact(fp, a.Name, a.Data, a.Meta); err != nil {
			return nil, fmt.Errorf("quality: router artifact %s: %w", a.Name, err)
		}
	}
	rt, err := s.r.Routing()
	if err != nil {
		return nil, err
	}
	if rt.Projection != store.ArtifactRouterW {
		return nil, fmt.Errorf("quality: routing uses %q, not the trained W", rt.Projection)
	}
	return rt, nil
}

// routedSpan is the span method name (one of MethodSpanTrained,
// MethodSpanTrainedSum, MethodSpanOracle) at b rows: the span method
// whose statistics the run reports, and the method to decode with; both
// nil when c does not configure it.
func (c *LongConfig) routedSpan(name string, s *spanStore, h []float32, b int, cache *llama.Cache, trained **store.Routing) (*spanMethod, method, error) {
	switch name {
	case MethodSpanOracle:
		if !c.Oracle {
			return nil, nil, nil
		}
		sm := newSpanMethod(s, h, b, c.Span.AnchorShare, false)
		return sm, &oracleSpan{spanMethod: sm, t: newTeacher(c.Model, cache, s.meta)}, nil
	}
	if c.Routers == nil {
		return nil, nil, nil
	}
	if *trained == nil {
		rt, err := s.trainedRouting(c.Model, &c.Span, c.Routers)
		if err != nil {
			return nil, nil, err
		}
		*trained = rt
	}
	sm := newSpanMethod(s, h, b, c.Span.AnchorShare, name == MethodSpanTrainedSum)
	var meth method = sm
	if name == MethodSpanTrainedWindow {
		wd, err := newWindowed(sm, int(WindowShare*float64(b)), b)
		if err != nil {
			return nil, nil, err
		}
		meth = wd
	}
	rt := *s.routing(*trained)
	rt.SpanTokens, rt.SpanBytes = sm.rt.SpanTokens, sm.rt.SpanBytes // this budget's anchors (and window), raw zoom's bytes
	sm.rt = rt
	return sm, meth, nil
}

// windowed is span memory (without summaries) with the context's last
// rows resident at full resolution: they leave the zoom budget, and a
// zoomed span adds only its rows outside the window.
type windowed struct {
	*spanMethod
	win *fixedRows // the window's rows as the stored memory holds them
}

func newWindowed(sm *spanMethod, w, b int) (*windowed, error) {
	meta, n := sm.s.meta, len(sm.resident)
	var toks []int
	for t := max(0, n-w); t < n; t++ {
		if !sm.resident[t] {
			sm.resident[t] = true
			toks = append(toks, t)
		}
	}
	sm.countSpanTokens()
	sm.fixedRows += float64(len(toks))
	left := float64(b) - sm.fixedRows
	sm.over, sm.zoom = left < 0, 0
	if left >= 1 {
		sm.zoom = int64(math.Floor(left)) * int64(meta.KVHeads)
	}
	win, err := sm.s.keepRows(toks)
	if err != nil {
		return nil, err
	}
	return &windowed{spanMethod: sm, win: win}, nil
}

func (w *windowed) rows(a *llama.StepAttention) ([]rowSet, error) {
	out, err := w.spanMethod.rows(a)
	if err != nil {
		return nil, err
	}
	for g := range out {
		win := w.win.sets[a.Layer][g]
		out[g].k = append(out[g].k, win.k...)
		out[g].v = append(out[g].v, win.v...)
	}
	return out, nil
}

// RouterSet is the router training data of one window (RouterData).
type RouterSet struct {
	// Examples are the zoom BCE's examples of every (layer, KV head): the
	// spans' summary keys and zoom costs (all anchors resident), and per
	// decode step the pre-RoPE queries and the teacher's attention mass
	// per span.
	Examples []router.Example
	// Init is the memory's untrained projection W per group (router.New's
	// start).
	Init [][]float32
	// Windows are the distillation term's windows (lab/router's KL), one
	// per budget asked for, in its order: see windows.
	Windows []router.Window
}

// RouterData prefills ctx once, builds its span memory as the long-context
// methods do and decodes cont teacher-forced with full attention: it
// returns the zoom BCE's examples and, per budget (a fraction of the
// context's rows, as LongConfig.Budgets; none for no distillation
// windows), the distillation window of span memory at that budget. A
// context whose span memory cannot be built is ErrSpanBuild.
func (c *LongConfig) RouterData(ctx, cont []int, budgets []float64) (*RouterSet, error) {
	if err := c.defaults(); err != nil {
		return nil, err
	}
	m, n := c.Model, len(ctx)
	if n < 2*sinks || len(cont) < 1 {
		return nil, fmt.Errorf("%w: quality: router data of %d tokens, continuation %d", format.ErrInvalidArgument, n, len(cont))
	}
	for _, f := range budgets {
		if !(f > 0 && f <= 1) {
			return nil, fmt.Errorf("%w: quality: budget %v outside (0, 1]", format.ErrInvalidArgument, f)
		}
	}
	pre, err := m.Forward(ctx, 0, nil, llama.ForwardOptions{})
	if err != nil {
		return nil, err
	}
	h := surprisal(pre, n)
	s, err := newSpanStore(m, pre.Cache, h, &c.Span)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errSpanBuild, err)
	}
	defer s.close()
	set := &RouterSet{}
	if set.Examples, set.Init, err = examples(m, s, pre.Cache, cont); err != nil {
		return nil, err
	}
	if len(budgets) > 0 {
		if set.Windows, err = c.windows(s, h, pre.Cache, cont, budgets); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// examples decodes cont over the prefilled context pc with full
// attention and returns the router examples of every (layer, KV head) of
// span memory s, and s's untrained projections.
func examples(m *llama.Model, s *spanStore, pc *llama.Cache, cont []int) (exs []router.Example, init [][]float32, err error) {
	meta, hd, n := s.meta, m.HeadDim(), pc.Len()
	groups := meta.Layers * meta.KVHeads
	exs = make([]router.Example, groups)
	for g := range exs {
		sums, err := s.r.Summaries(g/meta.KVHeads, g%meta.KVHeads)
		if err != nil {
			return nil, nil, err
		}
		ex := router.Example{Group: g, Tokens: append([]int(nil), s.rt.SpanTokens...), Ends: slices.Clone(s.rt.Ends)}
		for _, sm := range sums {
			for _, v := range sm.Key {
				ex.Keys = append(ex.Keys, float64(v))
			}
		}
		exs[g] = ex
		init = append(init, s.rt.Routers[g].W)
	}
	rec := &recorder{fixedRows: keepRows(pc, allTokens(n)), t: newTeacher(m, pc, meta), exs: exs, hd: hd}
	if _, err := decode(m, rec, cont, n); err != nil {
		return nil, nil, err
	}
	return exs, init, nil
}

// recorder attends over the whole context and records each step's router
// example.
type recorder struct {
	*fixedRows
	t   *teacher
	exs []router.Example
	hd  int
}

func (r *recorder) rows(a *llama.StepAttention) ([]rowSet, error) {
	mass := r.t.mass(a)
	kv := len(mass)
	per := len(a.QPre) / r.hd / kv
	for g := range kv {
		st := router.Step{Pos: a.Pos, Mass: mass[g], Queries: make([]float64, per*r.hd)}
		for i, v := range a.QPre[g*per*r.hd : (g+1)*per*r.hd] {
			st.Queries[i] = float64(v)
		}
		ex := &r.exs[a.Layer*kv+g]
		ex.Steps = append(ex.Steps, st)
	}
	return r.fixedRows.rows(a)
}

// methods is LongMethods with the routed span methods c configures before
// MethodSnapKVQuery.
func (c *LongConfig) methods() []string {
	var extra []string
	if c.Routers != nil {
		extra = append(extra, MethodSpanTrained, MethodSpanTrainedSum, MethodSpanTrainedWindow)
	}
	if c.Oracle {
		extra = append(extra, MethodSpanOracle)
	}
	if c.Bound {
		extra = append(extra, MethodSpanBound, MethodSpanBoundWindow, MethodSpanBoundCh, MethodSpanBoundChWindow, MethodSpanMeanKey, MethodSpanMeanKeyWindow,
			MethodSpanAnchor, MethodSpanAnchorWindow, MethodSpanAnchorBoundCh)
	}
	if c.Retrieval != nil {
		extra = append(extra, MethodSpanHeads, MethodSpanHeadsRouter)
		if c.Routers != nil {
			extra = append(extra, MethodSpanHeadsTrained)
		}
		if c.Oracle {
			extra = append(extra, MethodSpanHeadsOracle)
		}
		if c.RankFit != nil || c.rankData != nil {
			extra = append(extra, MethodSpanHeadsFit)
		}
	}
	out := append([]string(nil), LongMethods[:len(LongMethods)-1]...)
	out = append(append(out, extra...), LongMethods[len(LongMethods)-1])
	if len(c.Only) == 0 {
		return out
	}
	return slices.DeleteFunc(out, func(m string) bool { return !slices.Contains(c.Only, m) })
}

// checkOnly refuses an Only naming a method c does not measure (a bound
// method without Bound, a trained one without Routers, a typo), which
// would otherwise be left out of the table without a word.
func (c *LongConfig) checkOnly() error {
	only := c.Only
	c.Only = nil
	all := c.methods()
	c.Only = only
	for _, m := range only {
		if m != MethodFull && !slices.Contains(all, m) {
			return fmt.Errorf("%w: quality: method %q is not one of %q", format.ErrInvalidArgument, m, all)
		}
	}
	return nil
}
