package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// TestCatalogDamageNamesRecover flips bytes in the catalog's table (SST)
// of a closed store, at every 64th offset, and opens each copy: whenever
// Open or a read refuses with ErrCorruption, the error is one line, names
// the remedy (kvstore recover), and carries no Pebble internals; and what
// the store logs meanwhile holds no stack trace.
func TestCatalogDamageNamesRecover(t *testing.T) {
	fx := newFlipsFixture(t)
	catDir := filepath.Join(fx.dir, catalogDirName)
	ssts, _ := filepath.Glob(filepath.Join(catDir, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("the fixture has no SST")
	}
	orig, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(ssts[0])
	var damaged int
	for off := 0; off < len(orig); off += 64 {
		dir := t.TempDir()
		copyStore(t, fx.dir, dir)
		b := bytes.Clone(orig)
		b[off] ^= 0xff
		if err := os.WriteFile(filepath.Join(dir, catalogDirName, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		errs := openAndCollect(dir, slog.New(slog.NewTextHandler(&log, nil)), fx)
		for _, err := range errs {
			if !errors.Is(err, ErrCorruption) {
				continue
			}
			damaged++
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, "kvstore recover") || strings.Contains(msg, "detail carrier") {
				t.Errorf("SST byte %d: error is not one line naming kvstore recover: %q", off, msg)
			}
		}
		for line := range strings.Lines(log.String()) {
			if len(line) > 1024 || strings.Contains(line, "goroutine ") || strings.Contains(line, ".go:") {
				t.Errorf("SST byte %d: log line of %d bytes with Pebble internals: %.300q", off, len(line), line)
				break
			}
		}
	}
	if damaged == 0 {
		t.Fatal("no flip of the SST gave ErrCorruption: the test saw no damage")
	}
	t.Logf("%d corruption errors over %d flips", damaged, (len(orig)+63)/64)
}

// openAndCollect opens the store in dir with logger, reads every packet of
// fx and checks the store, returning every error it met.
func openAndCollect(dir string, logger *slog.Logger, fx *flipsFixture) []error {
	db, err := Open(dir, &Options{Logger: logger})
	if err != nil {
		return []error{err}
	}
	defer db.Close()
	var errs []error
	for _, id := range append(append([]format.PacketID{}, fx.kept...), fx.gone...) {
		v, err := db.Get(context.Background(), "ns", fx.spec.Fingerprint(), id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v.Release()
	}
	if _, err := db.Check(context.Background(), CheckOptions{}); err != nil {
		errs = append(errs, err)
	}
	return errs
}
