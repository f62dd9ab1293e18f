package gpu

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPoolReusesAndLimits(t *testing.T) {
	p, err := NewHostPool(CPU(), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	h, err := p.Get(ctx, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if h.Len() != 5000 {
		t.Fatalf("Get(5000) returned %d bytes", h.Len())
	}
	first := &h.Bytes()[0]
	p.Put(h)
	h2, _ := p.Get(ctx, 8000) // same 8 KiB class: the same memory
	if &h2.Bytes()[0] != first {
		t.Fatal("a returned buffer of the same class was not reused")
	}
	p.Put(h2)
	if _, err := p.Get(ctx, 65<<10); !errors.Is(err, ErrBudget) {
		t.Fatalf("Get above the limit: %v", err)
	}
	// A 64 KiB buffer needs the cached 8 KiB one freed: the limit holds.
	big, err := p.Get(ctx, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Allocated > st.Limit || st.InUse != 64<<10 {
		t.Fatalf("stats %+v", st)
	}
	// Now full: the next Get waits, and gives up with the context.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.Get(cctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get from a full pool: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		h, err := p.Get(ctx, 4096)
		if err == nil {
			p.Put(h)
		}
		got <- err
	}()
	time.Sleep(5 * time.Millisecond)
	p.Put(big)
	if err := <-got; err != nil {
		t.Fatalf("waiting Get after Put: %v", err)
	}
}

func TestPoolClose(t *testing.T) {
	p, _ := NewHostPool(CPU(), 16<<10)
	h, _ := p.Get(context.Background(), 16<<10)
	waiting := make(chan error, 1)
	go func() { _, err := p.Get(context.Background(), 4096); waiting <- err }()
	time.Sleep(5 * time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; !errors.Is(err, ErrClosed) {
		t.Fatalf("Get waiting across Close: %v", err)
	}
	p.Put(h)
	if st := p.Stats(); st.Allocated != 0 || st.InUse != 0 {
		t.Fatalf("after Close and Put: %+v", st)
	}
}

func TestPoolClass(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 4096}, {4096, 4096}, {4097, 8192}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20}} {
		if got := poolClass(c.n); got != c.want {
			t.Errorf("poolClass(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}
