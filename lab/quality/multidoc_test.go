package quality

import (
	"math"
	"testing"
)

// multiDocCI are the requests of the CI tests (here and in llamacpp):
// four requests of four documents of 60-90 bytes of held-out Go, the
// needle's document at each rank once.
var multiDocCI = MultiDocSpec{Requests: 4, DocsMin: 4, DocsMax: 4, DocMin: 60, DocMax: 90, Seed: 1}

// TestMultiDocRetrieval is a small version of docs/quality.md's
// multi-document needles: gocode-2k recalls a value defined in one of four
// documents across the packets as it does over a full recompute (top-1 per
// byte far above chance, 1/26, on both), the packets' distributions differ
// from the full recompute's (KL > 0) and CacheBlend's recompute brings
// them closer.
func TestMultiDocRetrieval(t *testing.T) {
	m, files := longCtxOrSkip(t, 2*multiDocCI.DocMax)
	reqs, err := MultiDocRequests(files, multiDocCI)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		if r.Needle != i || len(r.Docs) != 4 {
			t.Fatalf("request %d: needle in document %d of %d, want %d of 4", i, r.Needle, len(r.Docs), i)
		}
	}
	rows, err := RunMultiDoc(MultiDocConfig{Model: m, Requests: reqs, Compress: true, Keeps: []float64{0.5}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*MultiDocRow{}
	for i := range rows {
		r := &rows[i]
		got[r.Method] = r
		t.Logf("%-18s top-1 %.3f (worst %.3f), log-prob %.2f, exact %d/%d, KL %.4f", r.Method, r.Top1(), r.WorstTop1(), r.LogProb(), r.Exact(), len(r.Scores), r.KL())
	}
	if len(rows) != 7 {
		t.Fatalf("%d methods, want 7 (full, packets, cacheblend, int8, int4, tova and random at 50%%)", len(rows))
	}
	full, plain, blend := got[MultiFull], got[MultiPackets], got[MultiCacheBlend+" 15%"]
	if full == nil || plain == nil || blend == nil {
		t.Fatalf("methods %v: want %q, %q and %q", got, MultiFull, MultiPackets, MultiCacheBlend+" 15%")
	}
	for _, r := range []*MultiDocRow{full, plain} {
		if !(r.Top1() >= 0.25 && r.LogProb() > math.Log(1.0/26)) {
			t.Errorf("%s: top-1 per byte %.3f, log-prob %.2f: want >= 0.25 (chance %.3f) and above ln(1/26)", r.Method, r.Top1(), r.LogProb(), Chance)
		}
	}
	if full.KL() != 0 || !(plain.KL() > 0) || !(blend.KL() > 0) {
		t.Errorf("KL: full %v, packets %v, cacheblend %v: want 0, > 0 and > 0", full.KL(), plain.KL(), blend.KL())
	}
}
