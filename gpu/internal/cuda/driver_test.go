package cuda

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

func TestLoadMissingLibrary(t *testing.T) {
	d, err := Load("libkvstore-no-such-library.so.7")
	if d != nil || !errors.Is(err, ErrLoad) {
		t.Fatalf("Load of a missing library = %v, %v; want nil and ErrLoad", d, err)
	}
}

// TestLoadWithoutSymbols loads a real library that lacks the CUDA symbols:
// the error must name the first missing one instead of panicking.
func TestLoadWithoutSymbols(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs libc.so.6 (linux)")
	}
	_, err := Load("libc.so.6")
	if !errors.Is(err, ErrLoad) {
		t.Fatalf("Load(libc.so.6) = %v, want ErrLoad", err)
	}
	if got := err.Error(); !strings.Contains(got, "symbol cuInit missing") {
		t.Fatalf("error %q does not name the missing symbol", got)
	}
}

// TestSignaturesRegister binds every entry point type to a real C function
// (libc's abs) without calling it: purego rejects, by panicking, signatures
// it cannot pass, so this proves each one is callable on this platform.
func TestSignaturesRegister(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs libc.so.6 (linux)")
	}
	h, err := dlopen("libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	addr, err := dlsym(h, "abs")
	if err != nil {
		t.Fatal(err)
	}
	var d Driver
	for _, s := range d.symbols() {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: purego rejects the signature: %v", s.name, r)
				}
			}()
			register(s.fn, addr)
		}()
	}
	if d.LaunchKernel == nil || d.MemHostAlloc == nil {
		t.Fatal("registration left entry points nil")
	}
}

func TestName(t *testing.T) {
	for _, c := range []struct {
		r    Result
		want string
	}{
		{0, "CUDA_SUCCESS"},
		{2, "CUDA_ERROR_OUT_OF_MEMORY"},
		{100, "CUDA_ERROR_NO_DEVICE"},
		{218, "CUDA_ERROR_INVALID_PTX"},
		{12345, "CUresult(12345)"},
	} {
		if got := Name(c.r); got != c.want {
			t.Errorf("Name(%d) = %q, want %q", c.r, got, c.want)
		}
		var nilDriver *Driver
		if got := nilDriver.ErrorName(c.r); got != c.want {
			t.Errorf("nil driver ErrorName(%d) = %q, want %q", c.r, got, c.want)
		}
	}
}

// TestCallThroughPurego calls a real C function (libc's abs) through the
// same dlopen + RegisterFunc path the driver bindings use; it passes with
// CGO_ENABLED=0 too, where purego's fakecgo sets up the C runtime.
func TestCallThroughPurego(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs libc.so.6 (linux)")
	}
	h, err := dlopen("libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	addr, err := dlsym(h, "abs")
	if err != nil {
		t.Fatal(err)
	}
	var abs func(int32) Result
	register(&abs, addr)
	if got := abs(-1234); got != 1234 {
		t.Fatalf("abs(-1234) through purego = %d", got)
	}
}
