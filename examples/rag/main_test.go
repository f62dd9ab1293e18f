package main

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/internal/testenv"
)

// testdata is where the tests look for gocode-hd64.bin, as the
// repository's other tests do; without it they run on the random model.
var testdata = func() string {
	p, _ := testenv.ModelPath("gocode-hd64.bin")
	return filepath.Dir(p)
}()

func TestRunThreeDocuments(t *testing.T) {
	var out bytes.Buffer
	r, err := run(&out, config{testdata: testdata, docs: 3, docTokens: 12, questionTokens: 4, adapterRows: 1, adapterInit: "stats", trainRequests: 4, trainEpochs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Docs) != 3 || r.Recomputed != 4 || r.PromptTokens != 3*12+4 {
		t.Fatalf("%d docs, %d recomputed of %d prompt tokens", len(r.Docs), r.Recomputed, r.PromptTokens)
	}
	if !(r.KL >= 0) || math.IsInf(r.KL, 0) || !(r.KLNoDocs >= 0) || math.IsInf(r.KLNoDocs, 0) {
		t.Fatalf("KL(full||packets) %v, KL(full||question alone) %v", r.KL, r.KLNoDocs)
	}
	if !(r.KLAdapter >= 0) || math.IsInf(r.KLAdapter, 0) || r.AdapterRows != 2 || r.AdapterID == "" {
		t.Fatalf("adapter %q of %d rows: KL %v", r.AdapterID, r.AdapterRows, r.KLAdapter)
	}
	if r.Docs[0].ID == r.Docs[1].ID {
		t.Fatal("two documents got one packet id")
	}
	for _, s := range []string{r.Model, "4 (0 of documents)", "full recompute", "KL(full || packets)", "KL(full || adapter packets)", r.AdapterID, r.Docs[2].ID.Short()} {
		if !strings.Contains(out.String(), s) {
			t.Fatalf("output lacks %q:\n%s", s, out.String())
		}
	}
}

// TestRunOneDocumentEqualsRecompute: with a single document at position 0
// there is no missing context, so the packets path must give the full
// recompute's distribution up to float rounding.
func TestRunOneDocumentEqualsRecompute(t *testing.T) {
	r, err := run(&bytes.Buffer{}, config{testdata: testdata, docs: 1, docTokens: 12, questionTokens: 3, adapterRows: 1, trainRequests: 2, trainEpochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.KL > 1e-6 || r.NextFull != r.NextPackets {
		t.Fatalf("one document: KL %g, next token %d vs %d", r.KL, r.NextPackets, r.NextFull)
	}
	if r.KLNoDocs < 1e-3 {
		t.Fatalf("the document should matter: KL(full||question alone) = %g", r.KLNoDocs)
	}
}

// An adapter trained and stored by one run is loaded by id by the next,
// which then gets the same packets and the same KL.
func TestRunLoadsStoredAdapter(t *testing.T) {
	dir := t.TempDir()
	cfg := config{testdata: testdata, dir: dir, docs: 2, docTokens: 8, questionTokens: 3, adapterRows: 1, trainRequests: 2, trainEpochs: 1}
	first, err := run(&bytes.Buffer{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.adapterID = first.AdapterID
	second, err := run(&bytes.Buffer{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if second.AdapterTrain != 0 || second.KLAdapter != first.KLAdapter {
		t.Fatalf("loaded adapter: trained %v s, KL %v vs %v", second.AdapterTrain, second.KLAdapter, first.KLAdapter)
	}
}

// The default run-time adapter is a hidden BOS header: its packets hold
// the documents' rows only, and the adapter's KL is measured.
func TestRunHiddenHeaderAdapter(t *testing.T) {
	var out bytes.Buffer
	r, err := run(&out, config{testdata: testdata, docs: 2, docTokens: 10, questionTokens: 3, adapterRows: 1, trainRequests: 4, trainEpochs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.AdapterRows != 0 || r.AdapterID == "" || !(r.KLAdapter >= 0) || math.IsInf(r.KLAdapter, 0) {
		t.Fatalf("adapter %q of %d stored rows: KL %v", r.AdapterID, r.AdapterRows, r.KLAdapter)
	}
	if !strings.Contains(out.String(), "header hidden") {
		t.Fatalf("output does not say the header is hidden:\n%s", out.String())
	}
}
