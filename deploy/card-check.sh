#!/usr/bin/env bash
# The checks that need a real NVIDIA card, in one short run on a GPU host.
# Build the test binaries where Go is (they need no Go toolchain to run):
#   CGO_CFLAGS=-Wno-deprecated-declarations go test -c -tags nvml -o bin/gpu.test ./internal/runner/gpu
#   CGO_CFLAGS=-Wno-deprecated-declarations go test -c -tags nvml -o bin/cardcheck.test ./internal/runner/gpu/cardcheck
# then on the GPU host: OUT=/some/dir bash deploy/card-check.sh
# It writes nvidia-smi.txt (when nvidia-smi is there), gpu.txt (NVML read
# directly: every card once) and card.json (a runner agent measuring a job
# on the card through NVML: fingerprint, clocks, telemetry per run).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-./card-check}
mkdir -p "$out"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -q > "$out/nvidia-smi.txt" 2>&1
  nvidia-smi --query-gpu=uuid,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu --format=csv > "$out/nvidia-smi.csv" 2>&1
fi
status=0
./bin/gpu.test -test.v -test.run 'TestOpenNVML' > "$out/gpu.txt" 2>&1 || status=1
PERFGATE_CARD_REPORT="$out/card.json" ./bin/cardcheck.test -test.v -test.timeout 4m > "$out/cardcheck.txt" 2>&1 || status=1
tail -n 5 "$out/gpu.txt" "$out/cardcheck.txt"
exit $status
