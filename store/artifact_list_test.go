package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Artifacts walks every model's artifacts in (model, name) order with
// their descriptions, skips deleted ones, stops at fn's error, and calls
// an index entry without its record corruption.
func TestArtifactsAll(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	a, b := testSpec(format.DTypeBF16, 2, 2, 8).Fingerprint(), testSpec(format.DTypeF32, 2, 2, 8).Fingerprint()
	if string(a[:]) > string(b[:]) {
		a, b = b, a
	}
	for _, put := range []struct {
		model format.Fingerprint
		name  string
		data  string
	}{{b, "adapter/x", "bx"}, {a, "router/W", "aW-"}, {a, "adapter/y", "ay"}, {a, "gone", "g"}} {
		if err := db.PutArtifact(put.model, put.name, []byte(put.data), ArtifactMeta{Note: put.data}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.DeleteArtifact(a, "gone"); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := db.Artifacts(func(i ArtifactInfo) error {
		got = append(got, fmt.Sprintf("%s %s %d %s %v", i.Model.Short(), i.Name, i.Size, i.Meta.Note, i.CreatedAt.IsZero()))
		return nil
	})
	want := fmt.Sprint([]string{a.Short() + " adapter/y 2 ay false", a.Short() + " router/W 3 aW- false", b.Short() + " adapter/x 2 bx false"})
	if err != nil || fmt.Sprint(got) != want {
		t.Fatalf("Artifacts = %q, %v; want %s", got, err, want)
	}
	stop, n := errors.New("stop"), 0
	if err := db.Artifacts(func(ArtifactInfo) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("fn's error: %v after %d calls", err, n)
	}
	if err := db.cat.DB.Set(catalog.ArtifactIndexKey(b, "ghost"), nil, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Artifacts(func(ArtifactInfo) error { return nil }); !errors.Is(err, ErrCorruption) {
		t.Fatalf("an index entry without its record: %v", err)
	}
}
