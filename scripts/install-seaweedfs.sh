#!/bin/sh
# install-seaweedfs.sh installs the object store that the long form of the
# tier tests runs against: SeaweedFS (Apache-2.0), one `weed` binary that is
# master, volume server, filer and S3 gateway at once, at a pinned version,
# built from source into .deps/bin/weed under the repository root (ignored by
# git).
#
# SeaweedFS tags its releases "4.01" style, which are not semantic versions,
# so the Go module proxy knows it only by pseudo-versions; the pin below is
# the newest one the proxy served when the script was written. Its go.mod has
# replace directives, so `go install module@version` refuses it: the script
# fetches the module with `go mod download`, copies it out of the read-only
# module cache into a temporary directory and runs `go build` there.
#
# It is idempotent: a binary of the same version is reused (the version is
# recorded beside it, in .deps/bin/weed.version). On success it prints the
# binary's path, which callers export as KVSTORE_SEAWEED_BIN:
#
#	KVSTORE_LONG=1 KVSTORE_SEAWEED_BIN=$(bash scripts/install-seaweedfs.sh) go test ./tier -run Long -v -timeout 30m
#
# A built binary is also kept in a per-machine cache outside the checkout,
# ${KVSTORE_DEPS_CACHE:-$HOME/.cache/kvstore}/weed-<version>, so that a fresh
# clone on the same machine copies it instead of building. The build needs
# only the Go module proxy, about 2.7 GB of memory, and many minutes of CPU.
set -eu

. "$(dirname "$0")/cached-binary.sh"

module=github.com/seaweedfs/seaweedfs

build() {
	# GOFLAGS from the caller (say -race) must not leak into the server build;
	# the download runs outside any module so the checkout's go.mod is not
	# touched.
	dir=$(cd / && GOFLAGS= go mod download -json "$module@$version" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
	if [ -z "$dir" ] || [ ! -d "$dir" ]; then
		echo "install-seaweedfs.sh: go mod download of $module@$version gave no directory" >&2
		exit 1
	fi
	work=$(mktemp -d "${TMPDIR:-/tmp}/seaweedfs-build.XXXXXX")
	trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
	cp -R "$dir/." "$work/src"
	chmod -R u+w "$work/src"
	# -mod=mod lets go fill in go.sum entries the module zip lacks;
	# -trimpath keeps the binary independent of where it was built.
	(cd "$work/src" && GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath \
		-o "$exe.tmp" ./weed) >&2
	mv "$exe.tmp" "$exe"
}

install_binary weed v0.0.0-20261109003541-7506e5f91cd6 build
