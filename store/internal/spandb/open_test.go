package spandb

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kvstore/kvstore/format"
)

func TestOpen(t *testing.T) {
	fx := newFixture(t)
	m := memory(t, fx, 64, 1)
	id, _, _, err := fx.put("ns", "a", m)
	if err != nil {
		t.Fatal(err)
	}
	r, err := fx.s.Open("ns", m.Model.Fingerprint(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if r.ID() != id || fx.views.Load() != 1 || fx.h.files[1].Refs() != 2 {
		t.Fatalf("reader of %s, %d views, %d refs on its file; want %s, 1, 2", r.ID().Short(), fx.views.Load(), fx.h.files[1].Refs(), id.Short())
	}
	k, v, err := r.Resident(1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k, m.ResidentK[1]) || !bytes.Equal(v, m.ResidentV[1]) {
		t.Fatal("layer 1's resident rows read back differ")
	}
	if want := uint64(len(k) + len(v)); fx.c.read != want || fx.c.verified != want {
		t.Fatalf("counted %d bytes read, %d verified; want %d", fx.c.read, fx.c.verified, want)
	}
	// Head records come from the catalog, inside the gate.
	sums, err := r.Summaries(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != len(m.Heads[3].Summaries) || fx.h.entered != 0 {
		t.Fatalf("%d summaries of (1, 1), want %d; gate entered %d times more than left", len(sums), len(m.Heads[3].Summaries), fx.h.entered)
	}
	r.Release()
	if fx.views.Load() != 0 || fx.h.files[1].Refs() != 1 {
		t.Fatalf("after Release: %d views, %d refs", fx.views.Load(), fx.h.files[1].Refs())
	}
	if _, _, err := r.Resident(0); !errors.Is(err, errClosed) {
		t.Fatalf("read after Release: %v, want the store's closed error", err)
	}
}

func TestOpenRefusals(t *testing.T) {
	fx := newFixture(t)
	m := memory(t, fx, 64, 1)
	if _, _, _, err := fx.put("ns", "a", m); err != nil {
		t.Fatal(err)
	}
	fp := m.Model.Fingerprint()
	if _, err := fx.s.Open("ns", format.Fingerprint{1}, "a"); !errors.Is(err, errMismatch) {
		t.Fatalf("open for another model: %v, want model mismatch", err)
	}
	if _, err := fx.s.Open("ns", fp, "b"); !errors.Is(err, errNotFound) {
		t.Fatalf("open of an absent memory: %v, want not found", err)
	}
	if fx.h.fileCalls != 0 {
		t.Fatalf("refused opens took %d file references", fx.h.fileCalls)
	}
	// A blob file that stays out of the registry is retried, then corrupt.
	fx.h.noFiles = true
	if _, err := fx.s.Open("ns", fp, "a"); !errors.Is(err, format.ErrCorruption) || fx.h.fileCalls != maxAttempts {
		t.Fatalf("open with its blob file gone: %v after %d attempts, want ErrCorruption after %d", err, fx.h.fileCalls, maxAttempts)
	}
	// A model spec the store cannot read fails the open and drops the
	// file reference it took.
	fx.h.noFiles = false
	delete(fx.h.models, fp)
	if _, err := fx.s.Open("ns", fp, "a"); !errors.Is(err, errNotFound) {
		t.Fatalf("open without its model spec: %v, want not found", err)
	}
	if fx.h.files[1].Refs() != 1 || fx.views.Load() != 0 {
		t.Fatalf("failed open left %d refs, %d views", fx.h.files[1].Refs(), fx.views.Load())
	}
}
