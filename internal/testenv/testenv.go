// Package testenv decides, in one place, whether a test that needs something
// outside Go runs, skips or fails.
//
// A test asks for a capability (a model file, g++, libllama, an S3 server, a
// GPU, a long run). When the capability is missing the test skips, saying
// why, unless KVSTORE_REQUIRE names it: then the test fails instead. CI sets
// KVSTORE_REQUIRE to everything a CI machine has, so a test that could run
// there never passes by skipping.
//
//	KVSTORE_REQUIRE=model,gxx,libllama,s3   fail instead of skip for these
//	KVSTORE_REQUIRE=all                     every capability is required
//
// A main package may import testenv for ModelPath: the testing package it
// pulls in registers no flags outside a test binary.
//
// Capabilities and where they come from:
//
//	model     ../shared/testdata/*.bin next to the module root, or $KVSTORE_TESTDATA
//	gxx       g++ on PATH
//	go        the go command on PATH, for tests that build a binary
//	libllama  $KVSTORE_LLAMA_LIB, a directory holding libllama
//	s3        $KVSTORE_S3_BIN, a versitygw binary
//	gpu       a CUDA device (set by the GPU device check)
//	long      KVSTORE_LONG=1: measurements that take minutes
//	seaweed   $KVSTORE_SEAWEED_BIN, a SeaweedFS weed binary, for the long form
//	mount     root on Linux, to mount a small tmpfs (a real full disk)
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Capability names something a test may need from outside Go.
type Capability string

const (
	Model    Capability = "model"
	Gxx      Capability = "gxx"
	GoTool   Capability = "go"
	LibLlama Capability = "libllama"
	S3       Capability = "s3"
	GPU      Capability = "gpu"
	Long     Capability = "long"
	Seaweed  Capability = "seaweed"
)

// Required reports whether KVSTORE_REQUIRE names c (or "all").
func Required(c Capability) bool {
	for _, f := range strings.Split(os.Getenv("KVSTORE_REQUIRE"), ",") {
		f = strings.TrimSpace(f)
		if f == "all" && c != Long && c != GPU && c != Seaweed {
			return true
		}
		if f == string(c) {
			return true
		}
	}
	return false
}

// Need skips t when ok is false, or fails it when c is required. why says
// what was looked for, so the skip line tells the reader how to make the
// test run.
func Need(t testing.TB, c Capability, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	if Required(c) {
		t.Fatalf("%s required (KVSTORE_REQUIRE=%s) but missing: %s", c, os.Getenv("KVSTORE_REQUIRE"), why)
	}
	t.Skipf("needs %s: %s (KVSTORE_REQUIRE=%s turns this skip into a failure)", c, why, c)
}

// LongRun skips t unless KVSTORE_LONG=1 (or KVSTORE_REQUIRE names long).
func LongRun(t testing.TB, what string) {
	t.Helper()
	Need(t, Long, os.Getenv("KVSTORE_LONG") == "1", "set KVSTORE_LONG=1 for "+what)
}

// GxxPath returns the path of g++, or skips (fails when required).
func GxxPath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("g++")
	Need(t, Gxx, err == nil, "no g++ on PATH")
	return p
}

// GoToolPath returns the path of the go command on PATH (go test puts
// $GOROOT/bin first on a test's PATH); it needs no test, so a TestMain can
// build a binary with it.
func GoToolPath() (string, bool) {
	p, err := exec.LookPath("go")
	return p, err == nil
}

// GoToolchain returns the path of the go command, or skips (fails when go
// is required).
func GoToolchain(t testing.TB) string {
	t.Helper()
	p, ok := GoToolPath()
	Need(t, GoTool, ok, "no go command on PATH to build the binary")
	return p
}

// ModelFile returns the path of the named test checkpoint
// ("stories260K.bin", "gocode-hd64.bin"), or skips (fails when model is
// required). It looks in $KVSTORE_TESTDATA, then in
// <module root>/../shared/testdata. $KVSTORE_TESTMODEL, when set, overrides
// the path of stories260K.bin alone.
func ModelFile(t testing.TB, name string) string {
	t.Helper()
	p, ok := ModelPath(name)
	Need(t, Model, ok, "no "+name+" at "+p+" (set KVSTORE_TESTDATA to its directory)")
	return p
}

// ModelPath locates the named test checkpoint as ModelFile does, without a
// test; ok reports whether a regular file is there.
func ModelPath(name string) (path string, ok bool) {
	if name == "stories260K.bin" {
		if p := os.Getenv("KVSTORE_TESTMODEL"); p != "" {
			return p, isFile(p)
		}
	}
	if d := os.Getenv("KVSTORE_TESTDATA"); d != "" {
		p := filepath.Join(d, name)
		return p, isFile(p)
	}
	root, ok := ModuleRoot()
	if !ok {
		return name, false
	}
	p := filepath.Join(root, "..", "shared", "testdata", name)
	return p, isFile(p)
}

// ModuleRoot walks up from the working directory to the directory holding
// go.mod.
func ModuleRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if isFile(filepath.Join(dir, "go.mod")) {
			return dir, true
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", false
		}
		dir = up
	}
}

// Env returns the value of the environment variable that provides c
// (KVSTORE_LLAMA_LIB, KVSTORE_S3_BIN, KVSTORE_SEAWEED_BIN), or skips (fails
// when c is required) when it is unset or names nothing on disk.
func Env(t testing.TB, c Capability, name string) string {
	t.Helper()
	v := os.Getenv(name)
	_, err := os.Stat(v)
	Need(t, c, v != "" && err == nil, "set "+name+" (scripts/test.sh installs it)")
	return v
}

var known = []Capability{Model, Gxx, GoTool, LibLlama, S3, GPU, Long, Seaweed, Mount}

// Known reports whether c is a capability this package knows, so that a
// typo in KVSTORE_REQUIRE can be caught by a test.
func Known(c string) bool { return c == "all" || slices.Contains(known, Capability(c)) }

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
