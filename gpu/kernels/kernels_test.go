package kernels

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var includeRE = regexp.MustCompile(`(?m)^#include "([^"]+)"`)

// TestPTXMatchesSource fails when a kernel source or header changed and its
// PTX was not regenerated with gpu/scripts/gen-ptx.sh.
func TestPTXMatchesSource(t *testing.T) {
	for _, m := range Modules {
		src, err := Source(m.Source)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{m.Source}
		for _, inc := range includeRE.FindAllSubmatch(src, -1) {
			want = append(want, string(inc[1]))
		}
		for _, arch := range Archs {
			name := PTXName(m, arch)
			ptx, err := files.ReadFile(name)
			if err != nil {
				t.Fatalf("%s: %v (run gpu/scripts/gen-ptx.sh)", name, err)
			}
			hashes := sourceHashes(ptx)
			var listed []string
			for file := range hashes {
				listed = append(listed, file)
			}
			slices.Sort(listed)
			wantSorted := slices.Sorted(slices.Values(want))
			if !slices.Equal(listed, wantSorted) {
				t.Errorf("%s: lists sources %v, %s needs %v", name, listed, m.Source, wantSorted)
			}
			for _, file := range want {
				b, err := Source(file)
				if err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				sum := sha256.Sum256(b)
				if got := hex.EncodeToString(sum[:]); hashes[file] != got {
					t.Errorf("%s was built from %s with sha256 %s, the source now hashes to %s: run gpu/scripts/gen-ptx.sh",
						name, file, hashes[file], got)
				}
			}
			if !bytes.Contains(ptx, []byte(".entry "+m.Entry+"(")) {
				t.Errorf("%s: no entry point %s", name, m.Entry)
			}
			target := []byte(".target sm_" + string(rune('0'+arch/10)) + string(rune('0'+arch%10)))
			if !bytes.Contains(ptx, target) {
				t.Errorf("%s: no %q line", name, target)
			}
			if bytes.Contains(ptx, []byte("fma.rn.f32")) {
				t.Errorf("%s: contains a fused multiply-add; kernels must round every product", name)
			}
		}
	}
}

// TestEveryPTXHasASource keeps stale PTX of a deleted kernel out.
func TestEveryPTXHasASource(t *testing.T) {
	names, err := fs.Glob(files, "*.ptx")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range Modules {
		for _, a := range Archs {
			want = append(want, PTXName(m, a))
		}
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("PTX files %v, modules need exactly %v", names, want)
	}
}

func sourceHashes(ptx []byte) map[string]string {
	h := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(ptx))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "// source-sha256: ")
		if !ok {
			if strings.HasPrefix(sc.Text(), "//") {
				continue
			}
			break
		}
		if f := strings.Fields(line); len(f) == 2 {
			h[f[0]] = f[1]
		}
	}
	return h
}

func TestArch(t *testing.T) {
	for _, c := range []struct{ cc, want int }{{80, 80}, {86, 80}, {89, 80}, {90, 90}, {100, 90}, {120, 90}} {
		if got, err := Arch(c.cc); err != nil || got != c.want {
			t.Errorf("Arch(%d) = %d, %v; want %d", c.cc, got, err, c.want)
		}
	}
	if _, err := Arch(75); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Arch(75) error = %v, want ErrUnsupported", err)
	}
}

func TestPTXIsNULTerminated(t *testing.T) {
	for _, m := range Modules {
		b, err := PTX(m, 80)
		if err != nil {
			t.Fatal(err)
		}
		if b[len(b)-1] != 0 || bytes.IndexByte(b[:len(b)-1], 0) >= 0 {
			t.Errorf("%s: PTX must end in exactly one NUL", m.Source)
		}
	}
}
