#!/bin/sh
# device-check.sh — check kvstore's GPU layer on a machine with an NVIDIA
# GPU and no Go toolchain. Runs the binaries build-device-check.sh put next
# to this script; finishes (or stops itself) within 5 minutes (20 s for the
# binding tests, 200 s for the kernels, 60 s for the GPU zoom loop).
#
# Prints: correctness of every kernel, layout and dtype against the CPU
# reference (--- PASS/FAIL lines), then REPORT lines with H2D GB/s from
# pinned and pageable memory, device-to-device copy bandwidth, and kernel
# throughput next to it, then lab/quality's TestGPUZoomRandomModel: a
# decode loop on a random model whose zoomed spans are rebuilt on the GPU,
# with logits and zoom sets equal to the host path's (docs/quality.md, "GPU
# zoom path"). Exit status is non-zero if anything failed.
set -u
dir=$(cd "$(dirname "$0")" && pwd)
export KVSTORE_GPU=1 KVSTORE_GPU_REPORT=1 KVSTORE_REQUIRE=gpu
status=0

if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
fi

echo "== driver bindings"
timeout 20 "$dir/cuda.test" -test.v -test.timeout 15s >"$dir/cuda-test.log" 2>&1 || status=1
grep -E '^(--- |ok|PASS|FAIL|panic)|_test.go:[0-9]+:' "$dir/cuda-test.log"

echo "== kernels, pipeline and measurements on the GPU"
timeout 200 "$dir/gpu.test" -test.v -test.timeout 190s \
	-test.run '^(TestOpen|TestOpenWithoutLibrary|TestParamLayout|TestCUDA.*|TestDeviceReport)$' >"$dir/gpu-test.log" 2>&1
rc=$?
grep -E '^(\s*--- (PASS|FAIL|SKIP)|REPORT|ok|PASS|FAIL|panic)|_test.go:[0-9]+:' "$dir/gpu-test.log"
if [ $rc -ne 0 ]; then
	status=1
	echo "gpu.test exited with $rc (124 means it timed out); last lines of $dir/gpu-test.log:"
	tail -n 40 "$dir/gpu-test.log"
fi
echo "== GPU zoom loop (lab/quality)"
timeout 60 "$dir/quality.test" -test.v -test.timeout 55s \
	-test.run '^TestGPUZoomRandomModel$' >"$dir/quality-test.log" 2>&1
rc=$?
grep -E '^(\s*--- (PASS|FAIL|SKIP)|ok|PASS|FAIL|panic)|_test.go:[0-9]+:' "$dir/quality-test.log"
if [ $rc -ne 0 ]; then
	status=1
	echo "quality.test exited with $rc (124 means it timed out); last lines of $dir/quality-test.log:"
	tail -n 40 "$dir/quality-test.log"
fi
echo "== device check: $( [ $status -eq 0 ] && echo PASS || echo FAIL )"
exit $status
