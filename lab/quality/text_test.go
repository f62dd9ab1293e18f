package quality

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// LoadStories: a missing model is no model unless required, then an error
// naming where it looked; a file that is there is loaded (and a bad one is
// the loader's error, not a missing model).
func TestLoadStories(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KVSTORE_TESTMODEL", "")
	t.Setenv("KVSTORE_TESTDATA", dir)
	if m, err := LoadStories(false); m != nil || err != nil {
		t.Fatalf("missing, not required: %v, %v; want nil, nil", m, err)
	}
	want := filepath.Join(dir, "stories260K.bin")
	if _, err := LoadStories(true); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("missing, required: %v; want an error naming %s", err, want)
	}
	if err := os.WriteFile(want, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := LoadStories(false); err == nil || m != nil || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a bad file: %v, %v; want the loader's error", m, err)
	}
}

func TestParseFloats(t *testing.T) {
	cases := []struct {
		in   string
		want []float64
		bad  bool
	}{
		{"", nil, false},
		{"0.1", []float64{0.1}, false},
		{"0.05, 0.10,0.25", []float64{0.05, 0.1, 0.25}, false},
		{"0.1,x", nil, true},
		{"0.1,,0.2", nil, true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseFloats(c.in)
			if (err != nil) != c.bad || !slices.Equal(got, c.want) {
				t.Fatalf("ParseFloats(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.bad)
			}
		})
	}
}
