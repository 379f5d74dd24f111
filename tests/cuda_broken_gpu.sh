#!/usr/bin/env bash
# ctest test_cuda_broken_gpu_fails: test_cuda must FAIL, not skip, when a GPU
# driver is installed but CUDA cannot be used (docs/design.md, "The GPU";
# gpu::absent, cuda/cuda.h). On a machine without an NVIDIA driver it runs
# test_cuda in a private mount namespace whose /dev holds an empty nvidiactl:
# the driver then looks installed while the runtime still finds none, as with a
# driver older than the runtime. Exit 77 (skipped) where that cannot be staged.
#   bash tests/cuda_broken_gpu.sh build/tests/test_cuda
set -uo pipefail
test_cuda=$1
for f in /proc/driver/nvidia/version /dev/nvidiactl /dev/nvidia0 /dev/dxg; do
  [ -e "$f" ] && { echo "SKIPPED: an NVIDIA driver is installed ($f): test_cuda itself tells a working GPU from a broken one here"; exit 77; }
done
unshare -rm true 2>/dev/null || { echo "SKIPPED: unshare -rm (a private mount namespace) is not permitted here"; exit 77; }
out=$(unshare -rm sh -c 'mount -t tmpfs none /dev && touch /dev/nvidiactl /dev/null && exec "$0"' "$test_cuda" 2>&1)
rc=$?
echo "$out" | tail -5
echo "test_cuda exit status with a driver but no usable GPU: $rc"
if [ "$rc" -eq 1 ] && grep -q "FAILED: a GPU is present but cannot be used" <<<"$out"; then
  echo "ok: a broken GPU fails test_cuda"
  exit 0
fi
echo "FAILED: expected exit 1 and 'a GPU is present but cannot be used' (77 would mean the broken GPU was reported as skipped)"
exit 1
