package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLs(t *testing.T) {
	dir, ids := testStore(t)
	r := kv(t, "--dir", dir, "ls").want(t, exitOK)
	for _, id := range ids {
		if !strings.Contains(r.stdout, id.String()[:16]) {
			t.Fatalf("ls lacks %s:\n%s", id.Short(), r.stdout)
		}
	}
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("want a header and 3 rows:\n%s", r.stdout)
	}
	for _, c := range []struct {
		args []string
		n    int
		more bool
	}{
		{[]string{"--ns", "a"}, 2, false},
		{[]string{"--ns", "b"}, 1, false},
		{[]string{"--ns", "c"}, 0, false},
		{[]string{"--limit", "2"}, 2, true},
		{[]string{"--model", tinySpec().Fingerprint().String()[:6]}, 3, false},
		{[]string{"--model", "ffffffff"}, 0, false},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out lsOutput
			r := kv(t, append([]string{"ls", "--dir", dir, "--json"}, c.args...)...).want(t, exitOK)
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Packets) != c.n || out.More != c.more {
				t.Errorf("ls %v: %d packets (more %v), want %d (%v)", c.args, len(out.Packets), out.More, c.n, c.more)
			}
			for _, p := range out.Packets {
				if p.Tokens == 0 || p.Bytes == 0 || p.DType != "bf16" || p.Layers != 2 {
					t.Errorf("ls row %+v", p)
				}
			}
		})
	}
}
