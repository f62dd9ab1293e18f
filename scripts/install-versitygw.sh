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
# The first build downloads the module and compiles it (about a minute on a
# quiet machine; several on a busy 2-core one). It needs only the Go module
# proxy.
set -eu

version=v1.8.0
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.deps/bin
exe=$bin/versitygw
stamp=$bin/versitygw.version

installed() {
	[ -x "$exe" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version" ]
}

if ! installed; then
	mkdir -p "$bin"
	rm -f "$stamp"
	# GOFLAGS from the caller (say -race) must not leak into the server build;
	# -trimpath keeps the binary independent of where it was built.
	GOBIN=$bin GOFLAGS=-buildvcs=false go install -trimpath \
		"github.com/versity/versitygw/cmd/versitygw@$version" >&2
	if [ ! -x "$exe" ]; then
		echo "install-versitygw.sh: go install of versitygw@$version left no binary at $exe" >&2
		exit 1
	fi
	echo "$version" >"$stamp"
fi
echo "$exe"
