# cached-binary.sh is sourced by the install scripts of the test servers
# (install-versitygw.sh, install-seaweedfs.sh): the one place that decides
# whether a pinned binary must be built.
#
# install_binary NAME VERSION BUILD puts NAME at VERSION in .deps/bin/NAME
# under the repository root and prints its path. A binary already there
# with the same version (recorded in .deps/bin/NAME.version) is reused;
# else one kept in the per-machine cache outside the checkout,
# ${KVSTORE_DEPS_CACHE:-$HOME/.cache/kvstore}/NAME-VERSION, is copied (a
# fresh clone on the same machine, a CI run); else the function named BUILD
# is called to write $exe, and the result is copied into that cache (best
# effort: a read-only or missing cache only costs the next build).

install_binary() {
	name=$1 version=$2 build=$3
	root=$(cd "$(dirname "$0")/.." && pwd)
	bin=$root/.deps/bin
	exe=$bin/$name
	stamp=$bin/$name.version
	cache=${KVSTORE_DEPS_CACHE:-${HOME:-/tmp}/.cache/kvstore}
	cached=$cache/$name-$version

	if ! _installed && [ -x "$cached" ]; then
		mkdir -p "$bin"
		cp "$cached" "$exe.tmp" && mv "$exe.tmp" "$exe" && echo "$version" >"$stamp"
	fi
	if ! _installed; then
		mkdir -p "$bin"
		rm -f "$stamp"
		"$build"
		if [ ! -x "$exe" ]; then
			echo "$(basename "$0"): building $name $version left no binary at $exe" >&2
			exit 1
		fi
		echo "$version" >"$stamp"
	fi
	if [ ! -x "$cached" ]; then
		{ mkdir -p "$cache" && cp "$exe" "$cached.tmp.$$" && mv "$cached.tmp.$$" "$cached"; } 2>/dev/null || rm -f "$cached.tmp.$$"
	fi
	echo "$exe"
}

_installed() {
	[ -x "$exe" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version" ]
}
