#!/bin/sh
# install-versitygw.sh installs the S3 server that the tier tests run against:
# versitygw (Apache-2.0) at a pinned version, built from source with
# `go install` into .deps/bin/ under the repository root (ignored by git).
#
# It is idempotent: a binary of the same version is reused (the version is
# recorded beside it, in .deps/bin/versitygw.version). On success it prints
# the binary's path, which callers export as KVSTORE_S3_BIN:
#
#	export KVSTORE_S3_BIN="$(scripts/install-versitygw.sh)"
#
# A built binary is also kept in a per-machine cache outside the checkout,
# ${KVSTORE_DEPS_CACHE:-$HOME/.cache/kvstore}/versitygw-<version>, so that a
# fresh clone on the same machine (a CI run) copies it instead of building.
# The first build downloads the module and compiles it: 3 min 50 s of CPU,
# 20 min of wall time on the 2-core development machine under a load
# average near 20; it needs only the Go module proxy.
set -eu

. "$(dirname "$0")/cached-binary.sh"

build() {
	echo "install-versitygw.sh: building versitygw $version from source with go install (once per machine: minutes of CPU, up to 20 min of wall time on a loaded 2-core machine)" >&2
	# GOFLAGS from the caller (say -race) must not leak into the server build;
	# -trimpath keeps the binary independent of where it was built.
	GOBIN=$bin GOFLAGS=-buildvcs=false go install -trimpath \
		"github.com/versity/versitygw/cmd/versitygw@$version" >&2
}

install_binary versitygw v1.8.0 build
