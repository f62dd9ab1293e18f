#!/usr/bin/env bash
# The project's test command (README, and exactly what .ci/run calls).
#
# It installs what the tests need that Go does not bring, into ignored
# folders of the checkout (reused when already there), then runs the whole
# suite, with the race detector but for lab/quality (below):
#
#   libllama   @node-llama-cpp/linux-x64 from npm      scripts/install-libllama.sh
#   versitygw  the S3 server of the tier tests, v1.8.0  scripts/install-versitygw.sh
#
# and sets KVSTORE_REQUIRE so that a test that needs one of these, the
# models in ../shared/testdata, g++, an S3 server or a tmpfs mount (root), fails instead of skipping.
#
# The tests run with -count=1 (never a cached result) under `go test -json`,
# read by internal/testsummary: it prints each package's result as it
# ends, the output of every failed test, a line a minute saying what is
# still running, and at the end the count of packages and tests.
#
# Usage: scripts/test.sh [go test flags and packages]   (default: -race -timeout 30m on every package but lab/quality, then lab/quality without -race; a package's tests may take more than go test's 10 minutes on a loaded 2-core machine)
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)" >&2; }

go version
command -v g++ >/dev/null || { echo "scripts/test.sh: g++ is required (apt-get install g++)" >&2; exit 1; }

step "libllama: @node-llama-cpp/linux-x64 from npm into .deps/llama (reused when present)"
KVSTORE_LLAMA_LIB=$(bash scripts/install-libllama.sh)
export KVSTORE_LLAMA_LIB

step "versitygw: the S3 server of the tier tests into .deps/bin (reused or copied from ~/.cache/kvstore when present)"
KVSTORE_S3_BIN=$(bash scripts/install-versitygw.sh)
export KVSTORE_S3_BIN

export KVSTORE_REQUIRE=${KVSTORE_REQUIRE-model,gxx,go,libllama,s3,mount}
step "building the test summary"
summary=$(mktemp -d)/testsummary
trap 'rm -rf "$(dirname "$summary")"' EXIT
go build -o "$summary" ./internal/testsummary
if [ $# -gt 0 ]; then
	step "go test -count=1 $* (KVSTORE_REQUIRE=$KVSTORE_REQUIRE): compiling every package first, then a line per package"
	go test -json -count=1 "$@" | "$summary"
	exit
fi
# The default: every package with the race detector but lab/quality, the
# quality harness, whose tests are single-goroutine float loops over real
# models that -race slows tenfold (16 minutes of a 2-core CI run, the
# whole budget); the concurrent code it calls (store, gpu) is raced in its
# own packages. docs/decisions.md, "lab/quality runs without -race in CI".
quality=github.com/kvstore/kvstore/lab/quality
mapfile -t raced < <(go list ./... | grep -vx "$quality")
step "go test -count=1 -race -timeout 30m on every package but $quality, then $quality without -race (KVSTORE_REQUIRE=$KVSTORE_REQUIRE): compiling every package first (several minutes on 2 cores with a cold build cache, longer with -race), then a line per package"
{
	rc=0
	go test -json -count=1 -race -timeout 30m "${raced[@]}" || rc=$?
	go test -json -count=1 -timeout 30m "$quality" || rc=$?
	exit "$rc"
} | "$summary"
