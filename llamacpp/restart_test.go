//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/llamacpp"
	"github.com/kvstore/kvstore/store"
)

const restartEnv = "KVSTORE_LLAMACPP_RESTART_DIR"

var restartPrompt = goPrompt("func (r *Reader) Read(p []byte) (n int, err error) {\n\tif r.i >= int64(len(r.s)) {\n\t\treturn 0, io.EOF\n\t}\n\t")

const restartIDs = 24

// conversation runs the part both processes share: decode the prompt's
// last token at pos and generate greedily.
func conversation(c *llamacpp.Context, pos int) ([]int32, error) {
	if err := c.Decode(0, pos, restartPrompt[len(restartPrompt)-1:]); err != nil {
		return nil, err
	}
	var out []int32
	for i := range restartIDs {
		tok := argmax(c.Logits())
		out = append(out, tok)
		if i < restartIDs-1 {
			if err := c.Decode(0, pos+1+i, []int32{tok}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// restartChild is the first process of TestRestart (TestMain runs it when
// restartEnv is set): it prefills a conversation, saves it to the store,
// writes the packet id and the ids it goes on to generate, and exits.
func restartChild(dir string) error {
	db, err := store.Open(filepath.Join(dir, "store"), nil)
	if err != nil {
		return err
	}
	defer db.Close()
	lib, err := llamacpp.Open(llamacpp.Options{})
	if err != nil {
		return err
	}
	m, err := lib.LoadModel(filepath.Join(dir, "model.gguf"))
	if err != nil {
		return err
	}
	defer m.Close()
	c, err := m.NewContext(llamacpp.ContextOptions{Ctx: 256, Cache: llamacpp.CacheF32})
	if err != nil {
		return err
	}
	defer c.Close()
	doc := restartPrompt[:len(restartPrompt)-1]
	if err := c.Decode(0, 0, doc); err != nil {
		return err
	}
	id, err := llamacpp.Save(context.Background(), db, "chat", c, 0, u32s(doc))
	if err != nil {
		return err
	}
	ids, err := conversation(c, len(doc))
	if err != nil {
		return err
	}
	var sb strings.Builder
	sb.WriteString(id.String())
	for _, x := range ids {
		sb.WriteString(" " + strconv.Itoa(int(x)))
	}
	return os.WriteFile(filepath.Join(dir, "out"), []byte(sb.String()), 0o644)
}

// TestRestart: one process saves a conversation and exits; this one opens
// the store, restores it into a fresh context and continues greedy
// generation with the same ids.
func TestRestart(t *testing.T) {
	library(t)
	m := model(t, "gocode-hd64.bin")
	dir := t.TempDir()
	g, err := os.ReadFile(m.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.gguf"), g, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), restartEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("first process: %v\n%s", err, out)
	}
	out, err := os.ReadFile(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	id, err := format.ParsePacketID(f[0])
	if err != nil {
		t.Fatal(err)
	}
	var want []int32
	for _, s := range f[1:] {
		x, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, int32(x))
	}
	db := openStore(t, filepath.Join(dir, "store"))
	c := newContext(t, m, llamacpp.ContextOptions{Ctx: 256, Cache: llamacpp.CacheF32})
	l, err := llamacpp.Load(context.Background(), db, "chat", c, 0, []store.AssembleItem{{ID: id}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := conversation(c, l.Next)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != restartIDs || !slices.Equal(got, want) {
		t.Fatalf("restored conversation generates %v, the first process %v", got, want)
	}
	t.Logf("%d cells restored in a new process; the next %d ids agree: %v", l.Cells, len(got), got)
}
