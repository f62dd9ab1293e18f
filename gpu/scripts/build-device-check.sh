#!/usr/bin/env bash
# build-device-check.sh [OUT] — build what device-check.sh runs on a GPU
# machine that has no Go toolchain: test binaries built with CGO_ENABLED=0
# (no cgo, no CUDA at build time; purego's fakecgo loads libcuda.so.1 at run
# time, so they link only glibc's libc, libdl and libpthread dynamically)
# and the script itself, into OUT (default: .device at the repository root,
# which git ignores).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/.device}
mkdir -p "$out"
cd "$root"
CGO_ENABLED=0 go test -c -o "$out/gpu.test" ./gpu
CGO_ENABLED=0 go test -c -o "$out/cuda.test" ./gpu/internal/cuda
CGO_ENABLED=0 go test -c -o "$out/quality.test" ./lab/quality
cp gpu/scripts/device-check.sh "$out/device-check.sh"
chmod +x "$out/device-check.sh"
ls -l "$out"
