package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
)

// benchArgs is the smallest real run: Qwen2.5-3B-shaped packets of 4
// tokens (144 KiB), one run, every store.
func benchArgs(dir string, extra ...string) []string {
	return append([]string{"--shape", "qwen3b", "--tokens", "4", "--runs", "1",
		"--assemble", "2", "--dir", dir}, extra...)
}

func TestBenchTable(t *testing.T) {
	dir, saved := t.TempDir(), t.TempDir()+"/report.json"
	var out, errb bytes.Buffer
	if code := run(benchArgs(dir, "--ttft", "--save", saved), &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, s := range []string{"qwen3b, 4 tokens", "kvstore", "plain", "pebble", "badger", "bbolt",
		"write amp", "(1.00x)", "TTFT model", "break-even"} {
		if !strings.Contains(out.String(), s) {
			t.Fatalf("output lacks %q:\n%s", s, out.String())
		}
	}
	if errb.Len() != 0 {
		t.Fatalf("stderr is not a terminal but got output: %q", errb.String())
	}
	if b, err := os.ReadFile(saved); err != nil || !json.Valid(b) || !bytes.Contains(b, []byte(`"ttft"`)) {
		t.Fatalf("--save wrote no JSON report with the TTFT model: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("scratch left behind in %s: %v", dir, left)
	}
}

func TestBenchJSON(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(benchArgs(t.TempDir(), "--json", "--stores", "plain,kvstore"), &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		Report struct {
			Cases []struct {
				PacketBytes int64 `json:"packet_bytes"`
				Rows        []struct {
					Store string
					Put   struct {
						MBps float64 `json:"mb_per_s"`
					}
				}
			}
		}
		TTFT []any
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	c := got.Report.Cases
	if len(c) != 1 || c[0].PacketBytes != 4*36864 || len(c[0].Rows) != 2 || c[0].Rows[0].Store != "kvstore" {
		t.Fatalf("unexpected report: %+v", got.Report)
	}
	if c[0].Rows[1].Put.MBps <= 0 || got.TTFT != nil {
		t.Fatalf("no put figure, or a TTFT model nobody asked for: %+v", got)
	}
}

func TestBenchUsage(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--runs", "0", "--dir", dir},
		{"--shape", "gpt2", "--dir", dir},
		{"--tokens", "1k", "--dir", dir},
		{"--tokens", "0", "--dir", dir},
		{"--stores", "rocksdb", "--dir", dir},
		{"--dir", dir, "extra"},
		{"--no-such-flag"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, &out, &errb); code != exitOK || !strings.Contains(errb.String(), "-tokens") {
		t.Fatalf("--help: exit %d, %q", code, errb.String())
	}
}

// TestStatusQuiet: the status line stays off anything that is not a
// terminal, so piped reports carry no escape codes.
func TestStatusQuiet(t *testing.T) {
	f, err := os.Create(t.TempDir() + "/stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, w := range []io.Writer{f, &bytes.Buffer{}} {
		s := newStatus(w)
		s.show("qwen3b put")
		s.clear()
		if s.w != nil {
			t.Fatalf("%T: status line drawn on a non-terminal", w)
		}
	}
	if st, _ := f.Stat(); st.Size() != 0 {
		t.Fatalf("status wrote %d bytes to a file", st.Size())
	}
}
