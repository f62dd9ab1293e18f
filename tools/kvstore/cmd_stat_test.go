package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestStat(t *testing.T) {
	dir, ids := testStore(t)
	var out statOutput
	r := kv(t, "--dir", dir, "stat", "--json").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	var bytes uint64
	for _, id := range ids {
		bytes += header(t, dir, id).ExtentLength
	}
	if out.Packets != 3 || out.LiveBytes != bytes || out.DeadBytes != 0 || len(out.Groups) != 2 || len(out.Files) != 1 {
		t.Fatalf("stat: %+v", out)
	}
	if g := out.Groups[0]; g.Namespace != "a" || g.Packets != 2 || g.Tokens != (1+3)+(1+4) {
		t.Fatalf("group a: %+v", g)
	}
	if f := out.Files[0]; f.LiveBytes != bytes || f.LiveRatio != 1 || f.LiveExtents != 3 {
		t.Fatalf("file: %+v", f)
	}
	kv(t, "--dir", dir, "rm", ids[0].String()).want(t, exitOK)
	r = kv(t, "--dir", dir, "stat").want(t, exitOK)
	if !strings.Contains(r.stdout, "packets 2") || !strings.Contains(r.stdout, "000001.blob") {
		t.Fatalf("stat after rm:\n%s", r.stdout)
	}
}

// Tables print human sizes; --json keeps exact byte counts.
func TestStatHumanSizes(t *testing.T) {
	dir, _ := testStore(t)
	r := kv(t, "--dir", dir, "stat").want(t, exitOK)
	var st statOutput
	if err := json.Unmarshal([]byte(kv(t, "--dir", dir, "stat", "--json").want(t, exitOK).stdout), &st); err != nil {
		t.Fatal(err)
	}
	if want := humanBytes(st.Files[0].Size); !strings.Contains(r.stdout, "000001.blob  "+want) || !strings.Contains(want, "KiB") {
		t.Errorf("stat's file table lacks the human size %q:\n%s", want, r.stdout)
	}
	if fi, err := os.Stat(st.Files[0].Path); err != nil || uint64(fi.Size()) != st.Files[0].Size {
		t.Errorf("--json size %d is not the file's exact size: %v", st.Files[0].Size, err)
	}
	r = kv(t, "--dir", dir, "ls").want(t, exitOK)
	if !strings.Contains(r.stdout, humanBytes(st.Groups[0].Bytes/uint64(st.Groups[0].Packets))) {
		t.Errorf("ls lacks human sizes:\n%s", r.stdout)
	}
}
