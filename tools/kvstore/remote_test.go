package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/store"
	"github.com/kvstore/kvstore/store/admin"
)

// runIn runs the CLI in this process and returns its exit code and output.
func runIn(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// The read verbs print the same with --addr (the admin handler of the
// store, live in this process, mounted under a prefix) as with --dir, in
// text and in JSON, with the same exit codes: ls --contexts included (it
// used to answer "use --dir").
func TestRemoteSameOutput(t *testing.T) {
	dir, ids, _ := spanTestStore(t)
	id := ids[2].String()[:10]
	verbs := [][]string{
		{"stat"}, {"ls"}, {"ls", "--ns", "a"}, {"ls", "--limit", "2"}, {"inspect", id}, {"verify"}, {"check"},
		{"inspect", "ffff"}, {"inspect", id, "--ns", "b"}, // not found: exit 1
		{"ls", "--contexts"}, {"ls", "--contexts", "--limit", "1"}, {"ls", "--contexts", "--ns", "b"},
		{"ls", "--model", "zz"}, {"ls", "--after", "no-slash"}, // bad usage: exit 2
	}
	var want []string
	for _, v := range verbs {
		for _, js := range []bool{false, true} {
			args := append([]string{"--dir", dir}, v...)
			if js {
				args = append(args, "--json")
			}
			code, out, _ := runIn(args...)
			want = append(want, string(rune('0'+code))+out)
		}
	}
	db, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mux := http.NewServeMux()
	mux.Handle("/debug/kvstore/", http.StripPrefix("/debug/kvstore", admin.Handler(db, nil)))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	i := 0
	for _, v := range verbs {
		for _, js := range []bool{false, true} {
			args := append(append([]string{}, v...), "--addr", srv.URL+"/debug/kvstore")
			if js {
				args = append(args, "--json")
			}
			code, out, errs := runIn(args...)
			if got := string(rune('0'+code)) + out; got != want[i] {
				t.Errorf("%v: --addr gives (exit %s)\n%s\n--dir gives (exit %s)\n%s\nstderr: %s", args, got[:1], got[1:], want[i][:1], want[i][1:], errs)
			}
			i++
		}
	}
	if code, _, errs := runIn("stat", "--addr", srv.URL+"/debug/kvstore", "--dir", dir); code != exitUsage || !strings.Contains(errs, "not both") {
		t.Errorf("--addr with --dir: exit %d, %s", code, errs)
	}
	if code, _, errs := runIn("stat", "--addr", srv.URL+"/nothing"); code != exitFail || !strings.Contains(errs, "404") {
		t.Errorf("--addr of no admin handler: exit %d, %s", code, errs)
	}
}
