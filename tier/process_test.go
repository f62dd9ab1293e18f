package tier

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kvstore/kvstore/store"
)

// TestMain runs the test binary as a child process of TestTwoProcesses when
// KVSTORE_TIER_CHILD is set, and as the test suite otherwise.
func TestMain(m *testing.M) {
	if verb := os.Getenv("KVSTORE_TIER_CHILD"); verb != "" {
		if err := child(verb); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child is one process with its own local store over the shared tier:
// "put" pushes the seeded packet and stores it locally, printing whether
// it created the tier's header; "get" serves it through a Cache (fetched
// from the tier) and checks every byte against the packet regenerated from
// the seed.
func child(verb string) error {
	seed, _ := strconv.ParseUint(os.Getenv("KVSTORE_TIER_SEED"), 10, 64)
	tr, err := New(Options{Endpoint: os.Getenv("KVSTORE_TIER_ENDPOINT"), Bucket: os.Getenv("KVSTORE_TIER_BUCKET"),
		Credentials: Credentials{AccessKey: os.Getenv("KVSTORE_TIER_ACCESS"), SecretKey: os.Getenv("KVSTORE_TIER_SECRET")},
		PartSize:    4 << 10, RequestTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	db, err := store.Open(os.Getenv("KVSTORE_TIER_DIR"), nil)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := testPacket("shared", testSpec(), 50, seed)
	switch verb {
	case "put":
		_, how, err := tr.Push(ctx, p)
		if err != nil {
			return err
		}
		if _, err := db.Put(context.Background(), p); err != nil {
			return err
		}
		fmt.Println(map[Pushed]string{Created: "created", Present: "present"}[how])
		return nil
	case "get":
		c := &Cache{DB: db, Tier: tr}
		v, err := c.Get(ctx, p.Namespace, p.Model.Fingerprint(), packetID(p))
		if err != nil {
			return err
		}
		defer v.Release()
		for l := range p.Layers {
			k, val, err := v.Layer(l)
			if err != nil {
				return err
			}
			if string(k) != string(p.Layers[l].K) || string(val) != string(p.Layers[l].V) {
				return fmt.Errorf("layer %d differs from the packet put", l)
			}
		}
		fmt.Println("same")
		return nil
	}
	return fmt.Errorf("unknown verb %q", verb)
}

// TestTwoProcesses: processes with their own local stores share one tier.
// Two of them Put the same packet at once: one creates it, the other finds
// it, and one header results. A third, with an empty store, assembles it
// byte for byte from the tier.
func TestTwoProcesses(t *testing.T) {
	e := newEnv(t, Options{})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(verb string) (string, error) {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "KVSTORE_TIER_CHILD="+verb, "KVSTORE_TIER_SEED=77",
			"KVSTORE_TIER_ENDPOINT="+e.srv.Endpoint, "KVSTORE_TIER_BUCKET="+e.bucket,
			"KVSTORE_TIER_ACCESS="+e.srv.AccessKey, "KVSTORE_TIER_SECRET="+e.srv.SecretKey,
			"KVSTORE_TIER_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := run("put")
			if err != nil {
				o = fmt.Sprintf("%v: %s", err, o)
			}
			outs[i] = o
		}()
	}
	wg.Wait()
	if !(outs[0] == "created" && outs[1] == "present" || outs[0] == "present" && outs[1] == "created") {
		t.Fatalf("two concurrent writers said %q: want one created, one present", outs)
	}
	list, err := e.srv.Client().ListObjectsV2(ctxT(t), &s3.ListObjectsV2Input{Bucket: &e.bucket})
	if err != nil {
		t.Fatal(err)
	}
	headers := 0
	for _, o := range list.Contents {
		if strings.HasSuffix(*o.Key, "/header") {
			headers++
		}
	}
	if headers != 1 {
		t.Fatalf("%d header objects after two writers, want 1", headers)
	}
	if o, err := run("get"); err != nil || o != "same" {
		t.Fatalf("reader process: %v: %s", err, o)
	}
}
