package quality

import (
	"math"
	"testing"

	"github.com/kvstore/kvstore/adapter"
)

// MultiDocSinks on the CI requests: every mass is a share (0 to 1, the
// BOS's and the documents' at most 1 together); layer 0, whose keys and
// values depend on a token and its position only, gets the same masses
// from the full recompute, the plain packets and the hidden BOS header
// (the packets' rows are the full prefill's there); the queries read the
// needle's value rows; keeping the BOS rows puts layer-0 mass on them.
func TestMultiDocSinks(t *testing.T) {
	m, files := longCtxOrSkip(t, 2*multiDocCI.DocMax)
	spec := multiDocCI
	spec.Requests = 2
	reqs, err := MultiDocRequests(files, spec)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := adapter.Init(m, 2, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := MultiDocSinks(m, reqs, []MultiDocAdapter{{Name: "ref", Adapter: ref}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 || rows[4].Method != "adapter ref" || rows[0].Method != SinkFull || rows[1].Method != SinkPackets || rows[2].Method != SinkBOSHidden || rows[3].Method != SinkBOSVisible {
		t.Fatalf("layouts %+v", rows)
	}
	share := func(x float64) bool { return x >= 0 && x <= 1+1e-5 }
	for _, r := range rows {
		for l := range r.BOS {
			t.Logf("%-36s layer %d: BOS %.3f, starts %.3f, second %.3f, documents %.3f, value %.3f, adapter rows %.3f", r.Method, l, r.BOS[l], r.Starts[l], r.Second[l], r.Docs[l], r.Value[l], r.Adapter[l])
			if !share(r.BOS[l]) || !share(r.Starts[l]) || !share(r.Second[l]) || !share(r.Value[l]) || !share(r.BOS[l]+r.Docs[l]) ||
				r.Starts[l] > r.Docs[l]+1e-6 || r.Value[l] > r.Docs[l]+1e-6 || r.Adapter[l] > r.Docs[l]+1e-6 {
				t.Errorf("%s, layer %d: masses out of range", r.Method, l)
			}
		}
	}
	for _, r := range rows[1:3] {
		for _, x := range [][2]float64{{r.BOS[0], rows[0].BOS[0]}, {r.Starts[0], rows[0].Starts[0]}, {r.Docs[0], rows[0].Docs[0]}, {r.Value[0], rows[0].Value[0]}} {
			if math.Abs(x[0]-x[1]) > 1e-4 {
				t.Errorf("%s, layer 0: %v, full recompute %v: want equal", r.Method, x[0], x[1])
			}
		}
	}
	var value float64
	for _, v := range rows[0].Value {
		value = max(value, v)
	}
	if !(value > 0.01) {
		t.Errorf("full recompute: at most %.4f of the attention on the value's rows in any layer", value)
	}
	for l := range rows[0].Adapter {
		if rows[0].Adapter[l] != 0 || rows[1].Adapter[l] != 0 || rows[2].Adapter[l] != 0 || math.Abs(rows[3].Adapter[l]-rows[3].Starts[l]) > 1e-9 || !(rows[4].Adapter[l] > 0) {
			t.Errorf("layer %d: adapter-row mass %.4f %.4f %.4f %.4f (BOS rows %.4f) %.4f: want 0 with no visible rows, the BOS rows' when kept, > 0 for the reference's",
				l, rows[0].Adapter[l], rows[1].Adapter[l], rows[2].Adapter[l], rows[3].Adapter[l], rows[3].Starts[l], rows[4].Adapter[l])
		}
	}
	if !(rows[3].Starts[0] > rows[0].Starts[0]+1e-3) {
		t.Errorf("BOS kept: layer-0 mass on the packets' first rows %.4f, full recompute %.4f: want more", rows[3].Starts[0], rows[0].Starts[0])
	}
}
