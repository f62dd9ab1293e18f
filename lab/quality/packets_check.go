package quality

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/prune"
)

// PolicyCheck is the window policy (the first anchorRows tokens and the
// most recent, prune.Window) at a kept fraction checked on the document
// itself (prune.Calibrate), per codec setting: the probe stores the
// context's first N-P tokens (P: PacketConfig.CheckProbe) pruned to a
// fraction of them under the setting, assembles them back, decodes the
// context's own last P tokens over them (teacher-forced) and returns the
// mean KL against the same decode over the unpruned f32 prefix. The least
// fraction of the ladder whose probe KL is within the bound is applied to
// the whole context. Only the context is read: the decision is the one a
// store could make when the packet is put. Rows' Keep is the bound, Kept
// the fraction chosen.
const PolicyCheck = "window-check"

// Defaults of PolicyCheck.
const DefaultCheckProbe = 64

// DefaultCheckLadder is the kept fractions PolicyCheck tries, in order.
var DefaultCheckLadder = []float64{0.25, 0.375, 0.5, 0.625, 0.75, 1}

// checkRows measures PolicyCheck at each of cfg.Check's bounds for setting
// c, whose whole packet is id in pk.
func checkRows(cfg *PacketConfig, cache *llama.Cache, ctx, cont []int, full [][]float32, pk *packetStore, id format.PacketID, c setting) ([]PacketRow, error) {
	m, n := cfg.Model, len(ctx)
	probe, ladder := cfg.CheckProbe, cfg.CheckLadder
	if probe == 0 {
		probe = DefaultCheckProbe
	}
	if ladder == nil {
		ladder = DefaultCheckLadder
	}
	p := n - probe
	if probe < 1 || p < 2*anchorRows {
		return nil, fmt.Errorf("%w: quality: check: probe of %d tokens in a context of %d", format.ErrInvalidArgument, probe, n)
	}
	pre := cache.Slice(0, p)
	ref, err := decode(m, keepRows(pre, allTokens(p)), ctx[p:], p)
	if err != nil {
		return nil, err
	}
	ps, err := newPacketStore(m, pre, ctx[:p], cfg.DType)
	if err != nil {
		return nil, err
	}
	defer ps.db.Close()
	pid, err := ps.put(c)
	if err != nil {
		return nil, err
	}
	memo := map[float64]float64{}
	probeKL := func(f float64) (float64, error) {
		if kl, ok := memo[f]; ok {
			return kl, nil
		}
		s, err := windowSet(m, p, f)
		if err != nil {
			return 0, err
		}
		row, err := ps.measure(pid, c, keepSet{policy: "probe", keep: f, kept: prune.Budget(p, f), set: s}, ctx[p:], ref)
		if err != nil {
			return 0, err
		}
		memo[f] = row.KL
		return row.KL, nil
	}
	var out []PacketRow
	for _, b := range cfg.Check {
		f, _, err := prune.Calibrate(ladder, b, probeKL)
		if err != nil {
			return nil, err
		}
		s, err := windowSet(m, n, f)
		if err != nil {
			return nil, err
		}
		row, err := pk.measure(id, c, keepSet{policy: PolicyCheck, keep: b, kept: prune.Budget(n, f), set: s}, cont, full)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}

// windowSet is prune.Window keeping fraction f of n tokens, nil when that
// is every row.
func windowSet(m *llama.Model, n int, f float64) (*prune.Set, error) {
	k := prune.Budget(n, f)
	if k == n {
		return nil, nil
	}
	return prune.Window(m.Layers, m.KVHeads, n, k, anchorRows)
}
