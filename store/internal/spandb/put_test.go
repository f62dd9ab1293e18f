package spandb

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

func TestWriteAccounting(t *testing.T) {
	fx := newFixture(t)
	m := memory(t, fx, 64, 1)
	_, recs, added, err := fx.put("ns", "a", m)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := fx.s.Meta("ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	n := meta.ExtentLength
	if added != 1 || len(recs) != 1 {
		t.Fatalf("first put: added %d, %d records, want 1 and 1", added, len(recs))
	}
	r := recs[0]
	if r.Num != 1 || meta.ExtentOffset != format.BlobHeaderSize || r.Size != format.BlobHeaderSize+n ||
		r.LiveBytes != n || r.Extents != 1 || r.LiveExtents != 1 || r.DeadBytes != 0 {
		t.Fatalf("record %+v for an extent of %d bytes at %d", r, n, meta.ExtentOffset)
	}
	if fx.wrote != n || fx.syncs != 1 {
		t.Fatalf("wrote %d bytes in %d syncs, want %d in 1", fx.wrote, fx.syncs, n)
	}
	// The batch wrote the blob file record, the next-blob sequence (a new
	// file), the model spec and one head record per (layer, KV head).
	var stored catalog.BlobFile
	if _, err := fx.cat.Get(catalog.BlobFileKey(1), func(v []byte) (err error) {
		stored, err = catalog.DecodeBlobFile(1, v)
		return err
	}); err != nil || stored.LiveBytes != n || stored.Size != r.Size {
		t.Fatalf("catalogued record %+v (%v), want the one returned", stored, err)
	}
	var next uint32
	if found, err := fx.cat.Get(catalog.KeyNextBlob, func(v []byte) (err error) {
		next, err = catalog.DecodeSequence(v)
		return err
	}); err != nil || !found || next != 2 {
		t.Fatalf("next blob %d (found %v, %v), want 2", next, found, err)
	}
	for _, k := range [][]byte{catalog.ModelKey(m.Model.Fingerprint()), catalog.SpanHeadKey("ns", "a", 1, 1)} {
		if ok, err := fx.cat.Has(k); err != nil || !ok {
			t.Fatalf("key %x: found %v, %v", k, ok, err)
		}
	}
	// A second memory goes after the first in the same file, whose
	// record grows; the file is not new, so no sequence is written.
	if err := fx.cat.DB.Delete(catalog.KeyNextBlob, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	_, recs, added, err = fx.put("ns", "b", memory(t, fx, 48, 2))
	if err != nil {
		t.Fatal(err)
	}
	mb, err := fx.s.Meta("ns", "b")
	if err != nil {
		t.Fatal(err)
	}
	if added != 1 || len(recs) != 1 || mb.BlobFile != 1 || mb.ExtentOffset != r.Size ||
		recs[0].Size != r.Size+mb.ExtentLength || recs[0].LiveExtents != 2 || recs[0].LiveBytes != n+mb.ExtentLength {
		t.Fatalf("second put: added %d, records %+v, extent at %d of %d bytes", added, recs, mb.ExtentOffset, mb.ExtentLength)
	}
	if ok, err := fx.cat.Has(catalog.KeyNextBlob); err != nil || ok {
		t.Fatalf("next-blob written for an existing file (%v)", err)
	}
}

func TestWriteReplaces(t *testing.T) {
	fx := newFixture(t)
	if _, _, _, err := fx.put("ns", "a", memory(t, fx, 64, 1)); err != nil {
		t.Fatal(err)
	}
	old, err := fx.s.Meta("ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	// A smaller memory under the same name: its records replace the old
	// memory's, whose extent is dead; the count does not move.
	small := memory(t, fx, 32, 3)
	_, recs, added, err := fx.put("ns", "a", small)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := fx.s.Meta("ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	if added != 0 || len(recs) != 1 || r.Extents != 2 || r.LiveExtents != 1 ||
		r.DeadBytes != old.ExtentLength || r.LiveBytes != meta.ExtentLength {
		t.Fatalf("replacement: added %d, records %+v; old extent %d bytes, new %d", added, recs, old.ExtentLength, meta.ExtentLength)
	}
	if meta.Tokens != 32 || meta.ExtentOffset != old.ExtentOffset+old.ExtentLength {
		t.Fatalf("new root: %d tokens at %d", meta.Tokens, meta.ExtentOffset)
	}
	n, err := Count(fx.cat)
	if err != nil || n != 1 {
		t.Fatalf("count %d (%v), want 1", n, err)
	}
}

// TestWriteKillsOldExtentInSealedFile replaces a memory whose extent is
// in a file the writer has sealed since: the batch writes that file's
// record sealed and with the extent dead.
func TestWriteKillsOldExtentInSealedFile(t *testing.T) {
	fx := newFixture(t)
	if _, _, _, err := fx.put("ns", "a", memory(t, fx, 64, 1)); err != nil {
		t.Fatal(err)
	}
	old, err := fx.s.Meta("ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	fx.w.Limit = fx.w.Cur.End // the next extent goes to a new file
	_, recs, added, err := fx.put("ns", "a", memory(t, fx, 64, 1))
	if err != nil {
		t.Fatal(err)
	}
	if added != 0 || len(recs) != 2 || recs[0].Num != 2 || recs[1].Num != 1 {
		t.Fatalf("records %+v, want the new file's then the sealed one's", recs)
	}
	if s := recs[1]; !s.Sealed || s.LiveExtents != 0 || s.DeadBytes != old.ExtentLength || s.LiveBytes != 0 {
		t.Fatalf("sealed file's record %+v, want sealed and its %d bytes dead", s, old.ExtentLength)
	}
}

func TestWriteFittedW(t *testing.T) {
	fx := newFixture(t)
	m := memory(t, nil, 64, 1)
	p := &m.Projection
	if p.Fitted == nil {
		t.Fatal("Build fitted no W with no artifacts stored")
	}
	if _, _, _, err := fx.put("ns", "a", m); err != nil {
		t.Fatal(err)
	}
	arts := fx.h.Artifacts(&m.Model)
	a, ok, err := arts.Artifact(p.Name)
	if err != nil || !ok || !bytes.Equal(a.Data, p.Fitted) || a.Hash != p.Hash || a.Meta.DType != p.FittedMeta.DType {
		t.Fatalf("fitted W in the catalog: found %v (%v), %d bytes, want %d", ok, err, len(a.Data), len(p.Fitted))
	}
	if ok, err := fx.cat.Has(catalog.ArtifactIndexKey(m.Model.Fingerprint(), p.Name)); err != nil || !ok {
		t.Fatalf("artifact index key: %v %v", ok, err)
	}
	// A memory carrying the same fitted W (built before the first put
	// stored it) does not write it again; another W under its name is
	// refused.
	var before []byte
	_, _ = fx.cat.Get(catalog.ArtifactKey(m.Model.Fingerprint(), p.Name), func(v []byte) error { before = append(before, v...); return nil })
	if _, _, _, err := fx.put("ns", "b", memory(t, nil, 64, 1)); err != nil {
		t.Fatal(err)
	}
	var after []byte
	_, _ = fx.cat.Get(catalog.ArtifactKey(m.Model.Fingerprint(), p.Name), func(v []byte) error { after = append(after, v...); return nil })
	if !bytes.Equal(before, after) {
		t.Fatal("the same fitted W was written again")
	}
	other := memory(t, nil, 64, 5)
	if other.Projection.Hash == p.Hash {
		t.Fatal("two prefills fitted the same W")
	}
	if _, _, _, err := fx.put("ns", "c", other); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("another fitted W under %q: %v, want ErrInvalidArgument", p.Name, err)
	}
	if _, err := fx.s.Meta("ns", "c"); !errors.Is(err, errNotFound) {
		t.Fatalf("refused memory: %v, want not found", err)
	}
}

func TestWriteFailureCataloguesNothing(t *testing.T) {
	errSync, errCommit := errors.New("test: sync"), errors.New("test: commit")
	for _, tc := range []struct {
		name string
		set  func(fx *fixture)
		want error
	}{
		{"sync", func(fx *fixture) { fx.syncFn = func(vfs.File) error { return errSync } }, errSync},
		{"commit", func(fx *fixture) { fx.h.commitErr = errCommit }, errCommit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			tc.set(fx)
			if _, _, _, err := fx.put("ns", "a", memory(t, fx, 64, 1)); !errors.Is(err, tc.want) {
				t.Fatalf("put: %v, want %v", err, tc.want)
			}
			if _, err := fx.s.Meta("ns", "a"); !errors.Is(err, errNotFound) {
				t.Fatalf("after a failed put: %v, want not found", err)
			}
			for _, k := range [][]byte{catalog.BlobFileKey(1), catalog.KeyNextBlob} {
				if ok, err := fx.cat.Has(k); err != nil || ok {
					t.Fatalf("key %x catalogued by a failed put (%v)", k, err)
				}
			}
		})
	}
}
