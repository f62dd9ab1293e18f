package main

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/router"
	"github.com/kvstore/kvstore/store"
)

// routerArgs is a small router run on gocode-2k: 256-token windows, two
// with a needle, one of plain code.
func routerArgs(t *testing.T, dir, ckpt string, steps string) []string {
	model := testenv.ModelFile(t, "gocode-2k.bin")
	testenv.GoToolchain(t)
	return []string{"router", "--dir", dir, "--model", model, "--window", "256", "--needles", "2", "--text", "1", "--tail", "16",
		"--steps", steps, "--checkpoint", ckpt}
}

// storedRouters reads the router artifacts of gocode-2k's f32 fingerprint
// from the store in dir.
func storedRouters(t *testing.T, dir string) ([]router.Artifact, format.Fingerprint) {
	t.Helper()
	mf := modelFlags{path: testenv.ModelFile(t, "gocode-2k.bin"), dtype: "f32"}
	_, fp, err := mf.load()
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(dir, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	arts, err := router.Get(db, fp)
	if err != nil {
		t.Fatal(err)
	}
	return arts, fp
}

// router builds its examples, trains, reports and stores W, bias and tau
// for the model's fingerprint; run again with more steps it resumes from
// its checkpoint (no window built again) and ends where one uninterrupted
// run of as many steps does.
func TestRouterTrainResume(t *testing.T) {
	dir, ckpt := t.TempDir(), filepath.Join(t.TempDir(), "ckpt")
	args := append([]string{"--json", "--create"}, routerArgs(t, dir, ckpt, "6")...)
	r := kvtrain(t, args...).want(t, exitOK)
	var rep routerReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %q", err, r.stdout)
	}
	want := []string{store.ArtifactRouterW, store.ArtifactRouterBias, store.ArtifactTau, store.ArtifactRouterRecency}
	if !slices.Equal(rep.Artifacts, want) || rep.Steps != 6 || rep.Windows+rep.Skipped != 3 || rep.Windows < 1 ||
		!(rep.Loss < rep.FirstLoss) || rep.Model != fingerprint(t, testenv.ModelFile(t, "gocode-2k.bin")) {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(r.stderr, "kvtrain router: window 3/3") || !strings.Contains(r.stderr, "kvtrain router: step 1/6, loss ") {
		t.Fatalf("progress: %q", r.stderr)
	}
	arts, _ := storedRouters(t, dir)
	p, err := router.FromArtifacts(arts, 4, 2, 64)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Recency, make([]float64, 8)) {
		t.Fatalf("without --recency: recency weights %v, want 0", p.Recency)
	}

	r = kvtrain(t, routerArgs(t, dir, ckpt, "12")...).want(t, exitOK)
	if strings.Contains(r.stderr, "window") || !strings.Contains(r.stderr, "step 7/12") || !strings.Contains(r.stdout, "after 12 steps") {
		t.Fatalf("resumed run: stdout %q stderr %q", r.stdout, r.stderr)
	}
	resumed, _ := storedRouters(t, dir)

	dir2, ckpt2 := t.TempDir(), filepath.Join(t.TempDir(), "ckpt")
	kvtrain(t, append([]string{"--create"}, routerArgs(t, dir2, ckpt2, "12")...)...).want(t, exitOK)
	whole, _ := storedRouters(t, dir2)
	for i := range whole {
		if !slices.Equal(whole[i].Data, resumed[i].Data) {
			t.Fatalf("%s: the resumed run stored other values than the uninterrupted one", whole[i].Name)
		}
	}

	// A checkpoint of other data flags is refused.
	args = routerArgs(t, dir, ckpt, "12")
	args[slices.Index(args, "--needles")+1] = "3"
	if r := kvtrain(t, args...).want(t, exitUsage); !strings.Contains(r.stderr, "was built for") {
		t.Fatalf("stderr %q", r.stderr)
	}
	// So is one of other anchors, and anchors no memory can have.
	for _, c := range []struct{ alpha, say string }{{"0.5", "was built for"}, {"NaN", "--anchor-alpha must be finite"}} {
		args = append(routerArgs(t, dir, ckpt, "12"), "--anchor-alpha", c.alpha)
		if r := kvtrain(t, args...).want(t, exitUsage); !strings.Contains(r.stderr, c.say) {
			t.Fatalf("--anchor-alpha %s: stderr %q, want %q", c.alpha, r.stderr, c.say)
		}
	}
}

// With --kl the run builds a distillation window per window and budget,
// reports the distillation KL and its progress lines show it; a
// checkpoint built without --kl, or at other --kl-budgets, is refused
// for a run with --kl, and a run without --kl may resume one built with it.
func TestRouterDistill(t *testing.T) {
	dir, ckpt := t.TempDir(), filepath.Join(t.TempDir(), "ckpt")
	args := append(routerArgs(t, dir, ckpt, "2"), "--json", "--create", "--kl", "1", "--kl-budgets", "0.25", "--kl-steps", "8")
	r := kvtrain(t, args...).want(t, exitOK)
	var rep routerReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %q", err, r.stdout)
	}
	if rep.Steps != 2 || !(rep.FirstKL > 0) || !(rep.KL > 0) || !(rep.Loss > rep.KL) {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(r.stderr, ", kl ") {
		t.Fatalf("progress: %q", r.stderr)
	}
	ck, err := loadRouterCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if len(ck.Distill) != rep.Windows || !slices.Equal(ck.KLBudgets, []float64{0.25}) {
		t.Fatalf("%d distillation windows at %v for %d windows", len(ck.Distill), ck.KLBudgets, rep.Windows)
	}
	args = append(routerArgs(t, dir, ckpt, "3"), "--kl", "1", "--kl-budgets", "0.1")
	if r := kvtrain(t, args...).want(t, exitUsage); !strings.Contains(r.stderr, "not --kl-budgets") {
		t.Fatalf("other budgets: stderr %q", r.stderr)
	}
	r = kvtrain(t, routerArgs(t, dir, ckpt, "3")...).want(t, exitOK)
	if strings.Contains(r.stdout, "kl ") || !strings.Contains(r.stdout, "after 3 steps") {
		t.Fatalf("resumed without --kl: %q", r.stdout)
	}

	dir2, ckpt2 := t.TempDir(), filepath.Join(t.TempDir(), "ckpt")
	kvtrain(t, append(routerArgs(t, dir2, ckpt2, "1"), "--create")...).want(t, exitOK)
	args = append(routerArgs(t, dir2, ckpt2, "2"), "--kl", "1")
	if r := kvtrain(t, args...).want(t, exitUsage); !strings.Contains(r.stderr, "built without --kl") {
		t.Fatalf("no windows: stderr %q", r.stderr)
	}
	for _, bad := range [][]string{{"--kl", "-1"}, {"--kl", "1", "--kl-budgets", "1.5"}, {"--kl-steps", "-2"}} {
		if r := kvtrain(t, append(routerArgs(t, dir2, ckpt2, "2"), bad...)...).want(t, exitUsage); r.stderr == "" {
			t.Fatalf("%v: no message", bad)
		}
	}
}

// --recency trains a recency weight per (layer, KV head) and stores it,
// --recency-init sets where new routers start; resumed from a checkpoint whose examples carry no span ends it is
// refused.
func TestRouterRecency(t *testing.T) {
	dir, ckpt := t.TempDir(), filepath.Join(t.TempDir(), "ckpt")
	kvtrain(t, append(routerArgs(t, dir, ckpt, "4"), "--create", "--recency")...).want(t, exitOK)
	arts, _ := storedRouters(t, dir)
	p, err := router.FromArtifacts(arts, 4, 2, 64)
	if err != nil {
		t.Fatal(err)
	}
	for g, r := range p.Recency {
		if r == 0 {
			t.Fatalf("group %d: recency weight 0 after training with --recency (%v)", g, p.Recency)
		}
	}
	// --recency-init starts new routers there; without --recency the
	// weights stay.
	dir2, ckpt2 := t.TempDir(), filepath.Join(t.TempDir(), "ckpt")
	kvtrain(t, append(routerArgs(t, dir2, ckpt2, "3"), "--create", "--recency-init", "0.5")...).want(t, exitOK)
	arts, _ = storedRouters(t, dir2)
	if p, err = router.FromArtifacts(arts, 4, 2, 64); err != nil {
		t.Fatal(err)
	}
	for g, r := range p.Recency {
		if r != 0.5 {
			t.Fatalf("group %d: recency weight %v after --recency-init 0.5 without --recency", g, r)
		}
	}

	if r := kvtrain(t, append(routerArgs(t, dir2, ckpt2, "3"), "--recency-init", "NaN")...).want(t, exitUsage); !strings.Contains(r.stderr, "--recency-init") {
		t.Fatalf("--recency-init NaN: stderr %q", r.stderr)
	}
	// A resumed run keeps its routers' start: another --recency-init is
	// refused, not ignored; the same one resumes.
	if r := kvtrain(t, append(routerArgs(t, dir2, ckpt2, "4"), "--recency-init", "1")...).want(t, exitUsage); !strings.Contains(r.stderr, "--recency-init 0.5, not 1") {
		t.Fatalf("resumed with --recency-init 1 after 0.5: stderr %q", r.stderr)
	}
	kvtrain(t, append(routerArgs(t, dir2, ckpt2, "4"), "--recency-init", "0.5")...).want(t, exitOK)

	ck, err := loadRouterCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ck.Examples {
		ck.Examples[i].Ends = nil
	}
	if err := ck.save(ckpt); err != nil {
		t.Fatal(err)
	}
	if r := kvtrain(t, append(routerArgs(t, dir, ckpt, "5"), "--recency")...).want(t, exitUsage); !strings.Contains(r.stderr, "positions") {
		t.Fatalf("checkpoint without span ends: stderr %q", r.stderr)
	}
}

// --zoom-weight weighs the zoom BCE: over the same routers and examples a
// larger weight gives a larger loss, and a weight that is not finite and
// above 0 is refused.
func TestRouterZoomWeight(t *testing.T) {
	dir, ckpt := t.TempDir(), filepath.Join(t.TempDir(), "ckpt")
	kvtrain(t, append(routerArgs(t, dir, ckpt, "1"), "--create")...).want(t, exitOK)
	var loss []float64
	for _, w := range []string{"0.5", "1", "2"} {
		// Resumed at the checkpoint's step: no step taken, the
		// report's first loss is the same routers' under the weight.
		r := kvtrain(t, append(routerArgs(t, dir, ckpt, "1"), "--json", "--zoom-weight", w)...).want(t, exitOK)
		var rep routerReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%v: %q", err, r.stdout)
		}
		if rep.Steps != 1 || rep.Loss != rep.FirstLoss {
			t.Fatalf("--zoom-weight %s: trained again: %+v", w, rep)
		}
		loss = append(loss, rep.FirstLoss)
	}
	// With the budget penalty P and the BCE B: loss = w B + P.
	if b := loss[2] - loss[1]; !(b > 0) || math.Abs((loss[1]-loss[0])-b/2) > 1e-9*b {
		t.Fatalf("losses %v at weights 0.5, 1, 2: not w B + P", loss)
	}
	for _, bad := range []string{"0", "-1", "NaN", "+Inf"} {
		if r := kvtrain(t, append(routerArgs(t, dir, ckpt, "1"), "--zoom-weight", bad)...).want(t, exitUsage); !strings.Contains(r.stderr, "--zoom-weight") {
			t.Fatalf("--zoom-weight %s: stderr %q", bad, r.stderr)
		}
	}
}

// The built binary stops on SIGINT after its first step: exit 130, one
// "interrupted:" line, the checkpoint saved with the steps taken, nothing
// stored.
func TestRouterBinaryInterrupt(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kvtrain")
	if out, err := exec.Command(testenv.GoToolchain(t), "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir, ckpt := t.TempDir(), filepath.Join(t.TempDir(), "ckpt")
	cmd := exec.Command(bin, append([]string{"--create"}, routerArgs(t, dir, ckpt, "100000000")...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	slow := time.AfterFunc(5*time.Minute, func() { cmd.Process.Kill() })
	var before []string
	for stepped := false; !stepped; {
		if !lines.Scan() {
			t.Fatalf("kvtrain ended before its first step: stderr %q; exit %d", before, wait(cmd))
		}
		before = append(before, lines.Text())
		stepped = strings.Contains(lines.Text(), "step 1/")
	}
	slow.Stop()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	late := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	code := wait(cmd)
	if !late.Stop() {
		t.Fatalf("still running 30 s after the signal; stderr after it: %q", rest)
	}
	if code != exitInterrupted || len(rest) != 1 || !strings.HasPrefix(rest[0], "interrupted: kvtrain router: router: stopped at step ") ||
		!strings.HasSuffix(rest[0], "context canceled") {
		t.Fatalf("exit %d, stderr after the signal: %q", code, rest)
	}
	ck, err := loadRouterCheckpoint(ckpt)
	if err != nil || ck == nil || ck.State == nil || ck.State.Step < 1 || ck.Windows != 3 {
		t.Fatalf("checkpoint after the interrupt: %+v, %v", ck, err)
	}
	db, err := store.Open(dir, &store.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	if err := db.Artifacts(func(store.ArtifactInfo) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("%d artifacts stored after the interrupt, %v", n, err)
	}
	if _, err := os.Stat(ckpt); err != nil {
		t.Fatal(err)
	}
}
