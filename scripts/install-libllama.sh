#!/bin/sh
# install-libllama.sh installs the prebuilt llama.cpp that the llamacpp tests
# bind with purego: the npm package @node-llama-cpp/linux-x64 at a pinned
# version, into .deps/llama/ under the repository root (ignored by git).
#
# It is idempotent: an install of the same version is reused. On success it
# prints the directory holding libllama*.so, which callers export as
# KVSTORE_LLAMA_LIB:
#
#	export KVSTORE_LLAMA_LIB="$(scripts/install-libllama.sh)"
#
# Set KVSTORE_LLAMA_PKG to install another build of the same version (for
# example @node-llama-cpp/linux-x64-cuda).
set -eu

version=3.22.1
pkg=${KVSTORE_LLAMA_PKG:-@node-llama-cpp/linux-x64}
root=$(cd "$(dirname "$0")/.." && pwd)
deps=$root/.deps/llama
name=${pkg#@node-llama-cpp/}
libdir=$deps/node_modules/$pkg/bins/$name

installed() {
	[ -f "$deps/node_modules/$pkg/package.json" ] || return 1
	have=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$deps/node_modules/$pkg/package.json" | head -n 1)
	[ "$have" = "$version" ] && ls "$libdir"/libllama*.so >/dev/null 2>&1
}

if ! installed; then
	mkdir -p "$deps"
	[ -f "$deps/package.json" ] || printf '{"private":true}\n' >"$deps/package.json"
	npm install --prefix "$deps" --no-save --no-audit --no-fund --ignore-scripts \
		--loglevel=error "$pkg@$version" >&2
	if ! installed; then
		echo "install-libllama.sh: $pkg@$version installed but no libllama*.so in $libdir" >&2
		exit 1
	fi
fi
echo "$libdir"
