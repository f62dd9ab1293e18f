package store

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// The process-kill campaign re-executes the test binary as a child that
// writes to a store on disk and reports each operation on a pipe (fd 3):
//
//	p SEED   Put of packet SEED starts       P SEED   it returned nil
//	d ID     Delete of packet ID starts      D ID     it returned nil
//	c        Compact or GC returned
//
// An acknowledgement is written only after the call returns. The parent
// SIGKILLs the child at a random time, then reopens the store and checks
// it against the lines it read.
const (
	killChildEnv = "KVSTORE_KILL_CHILD_DIR"
	killSeedEnv  = "KVSTORE_KILL_CHILD_SEED"
)

// init turns the test binary into the child when the environment says so;
// it never returns then.
func init() {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		return
	}
	seed, _ := strconv.ParseUint(os.Getenv(killSeedEnv), 10, 64)
	if err := killChild(dir, seed); err != nil {
		fmt.Fprintln(os.Stderr, "kill child:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// killSpec is the model of the campaign's packets.
func killSpec() *format.ModelSpec { return testSpec(format.DTypeBF16, 2, 2, 8) }

// killPacket is packet seed of the campaign.
func killPacket(seed uint64) *Packet {
	return randPacket(killSpec(), "ns", 20+int(seed*7919%300), seed)
}

func killOpts() *Options {
	return &Options{FS: vfs.Default, BlobFileSize: 64 << 10, Logger: quiet}
}

// killChild runs operations on the store in dir until it is killed (or
// has done 5,000).
func killChild(dir string, seed uint64) error {
	ack := os.NewFile(3, "ack")
	say := func(f string, args ...any) error {
		_, err := fmt.Fprintf(ack, f+"\n", args...)
		return err
	}
	db, err := Open(dir, killOpts())
	if err != nil {
		return err
	}
	fp := killSpec().Fingerprint()
	rng := rand.New(rand.NewPCG(seed, 77))
	for i := range uint64(5000) {
		switch r := rng.IntN(10); {
		case r < 6:
			s := seed*10000 + i
			if err := say("p %d", s); err != nil {
				return err
			}
			if _, err := db.Put(context.Background(), killPacket(s)); err != nil {
				return err
			}
			if err := say("P %d", s); err != nil {
				return err
			}
		case r < 9:
			ids, _, err := db.List("ns", fp, nil, 1000)
			if err != nil || len(ids) == 0 {
				continue
			}
			id := ids[rng.IntN(len(ids))]
			if err := say("d %x", id[:]); err != nil {
				return err
			}
			if err := db.Delete(context.Background(), "ns", fp, id); err != nil {
				return err
			}
			if err := say("D %x", id[:]); err != nil {
				return err
			}
		default:
			if _, err := db.Compact(context.Background(), CompactOptions{LiveRatio: 0.8}); err != nil {
				return err
			}
			if _, err := db.GC(context.Background(), GCOptions{}); err != nil {
				return err
			}
			if err := say("c"); err != nil {
				return err
			}
		}
	}
	return db.Close()
}

// killOracle is what the parent knows from the acknowledgements.
type killOracle struct {
	l    *ledger
	acks int
}

// read applies the child's lines.
func (o *killOracle) read(t *testing.T, lines string) {
	sc := bufio.NewScanner(strings.NewReader(lines))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "p", "P":
			s, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatalf("bad line %q", sc.Text())
			}
			p := killPacket(s)
			id := format.ComputePacketID("ns", killSpec().Fingerprint(), "", p.TokenIDs)
			st := putPending
			if f[0] == "P" {
				st, o.acks = live, o.acks+1
			}
			o.l.set(id, p, st)
		case "d", "D":
			b, err := hex.DecodeString(f[1])
			if err != nil || len(b) != 32 {
				t.Fatalf("bad line %q", sc.Text())
			}
			id := format.PacketID(b)
			p := o.l.packets[id]
			if p == nil {
				t.Fatalf("child deleted packet %s it never put", id.Short())
			}
			st := deletePending
			if f[0] == "D" {
				st, o.acks = deleted, o.acks+1
			}
			o.l.set(id, p, st)
		case "c":
			o.acks++
		}
	}
}

// TestReliabilityProcessKill runs the child, SIGKILLs it at a random time
// (20 times; 200 with KVSTORE_LONG=1), and after each kill reopens the
// store: every acknowledged put is present and bit-exact, every
// acknowledged delete absent, every catalogued packet reads back, and
// Check finds nothing.
func TestReliabilityProcessKill(t *testing.T) {
	dir := t.TempDir()
	kills := pick(20, 200)
	o := &killOracle{l: newLedger()}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	seed0 := rng.Uint64() % 1000
	t.Logf("seed base %d", seed0)
	killedMidway, reconciled := 0, 0
	for k := range kills {
		seed := seed0*1000 + uint64(k)
		out, exited := runKillChild(t, dir, seed, time.Duration(20+rng.IntN(300))*time.Millisecond)
		if !exited {
			killedMidway++
		}
		o.read(t, out)
		where := fmt.Sprintf("kill %d (seed %d)", k, seed)
		db, err := Open(dir, killOpts())
		if err != nil {
			t.Fatalf("%s: reopen: %v", where, err)
		}
		if r := db.Stats().Reconciled; r.Changed() {
			reconciled++ // batches Pebble had not written when the child died
		}
		checkAllHeaders(t, db, where)
		for id, st := range o.l.snapshot() {
			checkState(t, db, o.l.packets[id], id, st, where)
		}
		rep, err := db.Check(context.Background(), CheckOptions{})
		if err != nil || !rep.OK() {
			t.Fatalf("%s: Check = %v, findings %v", where, err, rep.Findings)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		// What was pending is settled now: present or absent, it stays so.
		settle(t, o.l, dir)
	}
	t.Logf("%d SIGKILLs (%d while the child was still working, %d reopened with records the catalog had lost), %d acknowledged operations, %d packets tracked; all recovered, Check clean",
		kills, killedMidway, reconciled, o.acks, len(o.l.packets))
}

// settle turns pending states into what the reopened store holds.
func settle(t *testing.T, l *ledger, dir string) {
	db, err := Open(dir, killOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for id, st := range l.snapshot() {
		if st != putPending && st != deletePending {
			continue
		}
		ok, err := db.Has(context.Background(), "ns", killSpec().Fingerprint(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			l.set(id, l.packets[id], live)
		} else {
			l.set(id, l.packets[id], deleted)
		}
	}
}

// runKillChild starts the child on dir and SIGKILLs it after d; it returns
// the child's lines and whether it had exited on its own.
func runKillChild(t *testing.T, dir string, seed uint64, d time.Duration) (string, bool) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir, killSeedEnv+"="+strconv.FormatUint(seed, 10))
	cmd.ExtraFiles = []*os.File{w}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	lines := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		lines <- string(b)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("child exited early: %v: %s", err, stderr.String())
		}
		return <-lines, true
	case <-time.After(d):
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	return <-lines, false
}
