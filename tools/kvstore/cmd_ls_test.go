package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/store"
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

// ls --limit N prints a cursor that --after takes: paging through a store
// whose namespaces differ in length (catalog order sorts them by length
// first) lists every packet once, in the order plain ls does. A bad
// cursor and a --model that is not hex are usage errors (exit 2).
func TestLsAfterPages(t *testing.T) {
	dir, _ := testStore(t) // namespaces "a", "a", "b"
	db, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, ns := range []string{"aa", "team/x y"} {
		if _, err := db.Put(context.Background(), tinyPacket(ns, 10+i, 3)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var all lsOutput
	if err := json.Unmarshal([]byte(kv(t, "ls", "--dir", dir, "--json").want(t, exitOK).stdout), &all); err != nil || len(all.Packets) != 5 {
		t.Fatalf("ls: %d packets, %v", len(all.Packets), err)
	}
	var paged []string
	after := ""
	for range 10 {
		var page lsOutput
		args := []string{"ls", "--dir", dir, "--json", "--limit", "2"}
		if after != "" {
			args = append(args, "--after", after)
		}
		if err := json.Unmarshal([]byte(kv(t, args...).want(t, exitOK).stdout), &page); err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Packets {
			paged = append(paged, p.ID)
		}
		if !page.More {
			break
		}
		after = page.Next
	}
	var want []string
	for _, p := range all.Packets {
		want = append(want, p.ID)
	}
	if strings.Join(paged, ",") != strings.Join(want, ",") {
		t.Fatalf("pages listed\n%v\nls lists\n%v", paged, want)
	}
	// The text output names the cursor too: the last row's.
	r := kv(t, "ls", "--dir", dir, "--limit", "4").want(t, exitOK)
	if !strings.Contains(r.stdout, "--after aa/"+all.Packets[3].ID+")") {
		t.Fatalf("ls --limit 4 does not print the next cursor:\n%s", r.stdout)
	}
	for _, args := range [][]string{{"--model", "zz"}, {"--model", "0x12"}, {"--after", "no-slash"}, {"--after", "a/b/c"}} {
		r := kv(t, append([]string{"ls", "--dir", dir}, args...)...).want(t, exitUsage)
		if !strings.Contains(r.stderr, args[0][2:]) {
			t.Errorf("ls %v: %q does not name the flag", args, r.stderr)
		}
	}
}
