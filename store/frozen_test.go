package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// The frozen stores, testdata/format-<version>/store, were written by the
// code of each released format version (testdata/README.md says which
// commit and how); their manifest.json says what each holds, as that
// code read it back.

// frozenManifest is testdata/mkfrozen's Manifest.
type frozenManifest struct {
	Version string `json:"version"`
	Packets []struct {
		Name      string   `json:"name"`
		Namespace string   `json:"namespace"`
		Model     string   `json:"model"`
		ID        string   `json:"id"`
		AdapterID string   `json:"adapter_id"`
		Tokens    int      `json:"tokens"`
		DType     string   `json:"dtype"`
		Codecs    []string `json:"codecs"`
		SHA256    string   `json:"sha256"`
	} `json:"packets"`
	Gone []struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		Model     string `json:"model"`
		ID        string `json:"id"`
		Why       string `json:"why"`
	} `json:"gone"`
	Artifacts []struct {
		Model  string `json:"model"`
		Name   string `json:"name"`
		SHA256 string `json:"sha256"`
	} `json:"artifacts"`
	Spans []struct {
		Namespace string            `json:"namespace"`
		Model     string            `json:"model"`
		Name      string            `json:"name"`
		Tokens    int               `json:"tokens"`
		Spans     int               `json:"spans"`
		Blocks    map[string]string `json:"blocks"`
	} `json:"spans"`
}

// frozenVersions are the frozen stores, one per released format version.
var frozenVersions = []format.Version{format.Version10, format.Version11, format.Version12}

// frozenStore copies the frozen store of version v to a temporary
// directory and returns it with its manifest.
func frozenStore(t *testing.T, v format.Version) (string, *frozenManifest) {
	t.Helper()
	src := filepath.Join("testdata", "format-"+v.String())
	b, err := os.ReadFile(filepath.Join(src, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m frozenManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s/manifest.json: %v", src, err)
	}
	if m.Version != v.String() || len(m.Packets) == 0 || len(m.Gone) == 0 || len(m.Artifacts) == 0 || len(m.Spans) == 0 {
		t.Fatalf("%s/manifest.json: version %q, %d packets, %d gone, %d artifacts, %d span memories", src, m.Version,
			len(m.Packets), len(m.Gone), len(m.Artifacts), len(m.Spans))
	}
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(src, "store"))); err != nil {
		t.Fatal(err)
	}
	// Copies are read-only when the checkout is; the store writes them.
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chmod(path, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir, &m
}

// formatFiles returns the versions in dir's FORMAT and FORMAT.copy; an
// absent copy is the zero Version.
func formatFiles(t *testing.T, dir string) (main, copy format.Version) {
	t.Helper()
	var vs [2]format.Version
	for i, name := range []string{formatFileName, formatCopyName} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if vs[i], err = format.DecodeFormatFile(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return vs[0], vs[1]
}

func parseFingerprint(t *testing.T, s string) format.Fingerprint {
	t.Helper()
	var fp format.Fingerprint
	if b, err := hex.DecodeString(s); err != nil || len(b) != len(fp) {
		t.Fatalf("fingerprint %q: %v", s, err)
	} else {
		copy(fp[:], b)
	}
	return fp
}

func parseID(t *testing.T, s string) format.PacketID {
	t.Helper()
	id, err := format.ParsePacketID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkFrozen reads everything m lists from db and compares it: every
// packet's K and V bytes, header and codecs, the gone packets' absence,
// every artifact and every span memory block. With rebuilt, db's catalog
// was rebuilt by Recover from the blob log: only packets with a put
// record are in it (format 1.1 and later), evictions without a tombstone
// (before 1.2) are undone, and artifacts and span memories are gone.
func checkFrozen(t *testing.T, db *DB, m *frozenManifest, v format.Version, rebuilt bool) {
	t.Helper()
	ctx := context.Background()
	for _, p := range m.Packets {
		fp, id := parseFingerprint(t, p.Model), parseID(t, p.ID)
		view, err := db.Get(ctx, p.Namespace, fp, id)
		if rebuilt && v == format.Version10 {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("packet %s after a rebuild of a 1.0 store: %v, want ErrNotFound (no put record)", p.Name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("packet %s: %v", p.Name, err)
		}
		h := view.Header()
		sum := sha256.New()
		for l := range view.Layers() {
			k, val, err := view.Layer(l)
			if err != nil {
				view.Release()
				t.Fatalf("packet %s layer %d: %v", p.Name, l, err)
			}
			sum.Write(k)
			sum.Write(val)
		}
		var codecs []string
		for _, c := range h.Chunks {
			if !slices.Contains(codecs, c.Codec.String()) {
				codecs = append(codecs, c.Codec.String())
			}
		}
		slices.Sort(codecs)
		view.Release()
		if got := hex.EncodeToString(sum.Sum(nil)); got != p.SHA256 {
			t.Fatalf("packet %s: K and V hash %s, want %s", p.Name, got, p.SHA256)
		}
		if int(h.Tokens) != p.Tokens || h.DType.String() != p.DType || h.AdapterID != p.AdapterID || !slices.Equal(codecs, p.Codecs) {
			t.Fatalf("packet %s: %d tokens, %v, adapter %q, codecs %v; want %d, %s, %q, %v", p.Name, h.Tokens, h.DType, h.AdapterID, codecs,
				p.Tokens, p.DType, p.AdapterID, p.Codecs)
		}
	}
	for _, g := range m.Gone {
		ok, err := db.Has(ctx, g.Namespace, parseFingerprint(t, g.Model), parseID(t, g.ID))
		back := rebuilt && g.Why == "evicted" && v == format.Version11
		if err != nil || ok != back {
			t.Fatalf("%s packet %s: Has %v, %v; want %v", g.Why, g.Name, ok, err, back)
		}
	}
	for _, a := range m.Artifacts {
		b, err := db.GetArtifact(parseFingerprint(t, a.Model), a.Name)
		switch {
		case rebuilt && !errors.Is(err, ErrNotFound):
			t.Fatalf("artifact %s after a rebuild: %v, want ErrNotFound", a.Name, err)
		case rebuilt:
		case err != nil:
			t.Fatalf("artifact %s: %v", a.Name, err)
		case sha(b) != a.SHA256:
			t.Fatalf("artifact %s: hash %s, want %s", a.Name, sha(b), a.SHA256)
		}
	}
	for _, s := range m.Spans {
		r, err := db.OpenSpanMemory(ctx, s.Namespace, parseFingerprint(t, s.Model), s.Name)
		if rebuilt {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("span memory %s after a rebuild: %v, want ErrNotFound", s.Name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("span memory %s: %v", s.Name, err)
		}
		got := map[string]string{}
		for k, b := range spanBlocks(t, r) {
			if !bytes.HasPrefix([]byte(k), []byte("summary")) {
				got[k] = sha(b)
			}
		}
		meta := r.Meta()
		r.Release()
		if int(meta.Tokens) != s.Tokens || len(meta.Spans) != s.Spans || len(got) != len(s.Blocks) {
			t.Fatalf("span memory %s: %d tokens, %d spans, %d blocks; want %d, %d, %d", s.Name, meta.Tokens, len(meta.Spans), len(got),
				s.Tokens, s.Spans, len(s.Blocks))
		}
		for k, want := range s.Blocks {
			if name := frozenBlockName(k); got[name] != want {
				t.Fatalf("span memory %s: block %q hash %s, want %s", s.Name, k, got[name], want)
			}
		}
	}
}

// frozenBlockName maps mkfrozen's block names to spanBlocks'.
func frozenBlockName(k string) string {
	var l, h, s int
	var kind string
	if n, _ := fmt.Sscanf(k, "factors %d %d %d %s", &l, &h, &s, &kind); n == 4 {
		return fmt.Sprintf("%d %d %d %s", l, h, s, kind)
	}
	return k
}

// checkClean requires Check and Verify to find nothing.
func checkClean(t *testing.T, db *DB, where string) {
	t.Helper()
	ctx := context.Background()
	c, err := db.Check(ctx, CheckOptions{})
	if err != nil || !c.OK() {
		t.Fatalf("%s: Check: %v, %+v", where, err, c)
	}
	v, err := db.Verify(ctx, VerifyOptions{})
	if err != nil || !v.OK() || v.Extents == 0 {
		t.Fatalf("%s: Verify: %v, %+v", where, err, v)
	}
}

// TestFrozenStores opens the store each released format version wrote:
// read-only, it serves every packet, artifact and span memory block as
// that version read them, the deleted and evicted packets stay gone,
// Check and Verify find nothing, and its FORMAT is left as it was; read-
// write, the same, and FORMAT and FORMAT.copy then say format.Current
// (docs/format.md, "Versions and compatibility"); a packet written then
// reads back after a reopen, with the old ones.
func TestFrozenStores(t *testing.T) {
	ctx := context.Background()
	for _, v := range frozenVersions {
		t.Run(v.String(), func(t *testing.T) {
			dir, m := frozenStore(t, v)
			want := format.Version{}
			if v.Compare(format.Version12) >= 0 {
				want = v // FORMAT.copy came with 1.2
			}
			if main, copy := formatFiles(t, dir); main != v || copy != want {
				t.Fatalf("frozen FORMAT %v, FORMAT.copy %v; want %v, %v", main, copy, v, want)
			}

			db, err := Open(dir, &Options{ReadOnly: true, Logger: quiet})
			if err != nil {
				t.Fatalf("read-only open: %v", err)
			}
			checkFrozen(t, db, m, v, false)
			checkClean(t, db, "read-only")
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if main, copy := formatFiles(t, dir); main != v || copy != want {
				t.Fatalf("after a read-only open: FORMAT %v, FORMAT.copy %v; want them unchanged", main, copy)
			}

			db, err = Open(dir, &Options{Logger: quiet})
			if err != nil {
				t.Fatalf("read-write open: %v", err)
			}
			if main, copy := formatFiles(t, dir); main != format.Current || copy != format.Current {
				t.Fatalf("after a read-write open: FORMAT %v, FORMAT.copy %v; want %v", main, copy, format.Current)
			}
			checkFrozen(t, db, m, v, false)
			checkClean(t, db, "read-write")
			spec := testSpec(format.DTypeF16, 2, 2, 8)
			p := randPacket(spec, "new", 9, 77)
			id, err := db.Put(ctx, p)
			if err != nil {
				t.Fatalf("Put into the %v store: %v", v, err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			db, err = Open(dir, &Options{ReadOnly: true, Logger: quiet})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer db.Close()
			if out, err := readBack(db, p, id); out != readExact {
				t.Fatalf("the new packet after a reopen: %v (%v)", out, err)
			}
			checkFrozen(t, db, m, v, false)
			checkClean(t, db, "reopened")
		})
	}
}

// TestFrozenRecover rebuilds the catalog of each frozen store from its
// blob files: what comes back is what docs/format.md says each version's
// blob log holds. 1.0 packets have no put record and are not rebuilt;
// 1.1 and 1.2 packets are, and their deleted packet stays deleted; the
// packet a 1.1 store evicted comes back (1.1 evictions wrote no
// tombstone), the one a 1.2 store evicted stays evicted.
func TestFrozenRecover(t *testing.T) {
	for _, v := range frozenVersions {
		t.Run(v.String(), func(t *testing.T) {
			dir, m := frozenStore(t, v)
			rep, err := Recover(dir, &Options{Logger: quiet})
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if rep.Format.Version != v || rep.Format.Rewritten || len(rep.Problems) != 0 {
				t.Fatalf("Recover: %+v", rep)
			}
			if main, _ := formatFiles(t, dir); main != v {
				t.Fatalf("Recover changed FORMAT to %v", main)
			}
			// Every put record is inserted (the gone packets' too), and
			// every tombstone deletes its packet again.
			puts, tombstones, noRecord := len(m.Packets)+len(m.Gone), 0, len(m.Spans)
			for _, g := range m.Gone {
				if g.Why == "deleted" || v.Compare(format.Version12) >= 0 {
					tombstones++
				}
			}
			if v == format.Version10 {
				puts, tombstones, noRecord = 0, 0, len(m.Packets)+len(m.Gone)+len(m.Spans)
			}
			if rep.Inserted != puts || rep.Deleted != tombstones || rep.NoRecord != noRecord {
				t.Fatalf("Recover of a %v store: %d inserted, %d deleted, %d without a record; want %d, %d, %d", v,
					rep.Inserted, rep.Deleted, rep.NoRecord, puts, tombstones, noRecord)
			}
			db, err := Open(dir, &Options{ReadOnly: true, Logger: quiet})
			if err != nil {
				t.Fatalf("open after Recover: %v", err)
			}
			defer db.Close()
			checkFrozen(t, db, m, v, true)
		})
	}
}
