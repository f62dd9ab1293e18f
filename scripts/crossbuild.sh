#!/usr/bin/env bash
# crossbuild.sh: go build ./... and go vet ./... (which compiles the tests
# too) for every platform the module promises to build on. Exits non-zero
# at the first target that fails, naming it.
#
#	scripts/crossbuild.sh                  all targets
#	scripts/crossbuild.sh linux/386 ...    only these
set -euo pipefail
cd "$(dirname "$0")/.."

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	targets=(linux/amd64 linux/arm64 linux/386 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64)
fi

for t in "${targets[@]}"; do
	os=${t%/*} arch=${t#*/}
	start=$SECONDS
	if ! GOOS=$os GOARCH=$arch go build ./... || ! GOOS=$os GOARCH=$arch go vet ./...; then
		echo "crossbuild: $t FAILED" >&2
		exit 1
	fi
	echo "crossbuild: $t ok ($((SECONDS - start))s)"
done
