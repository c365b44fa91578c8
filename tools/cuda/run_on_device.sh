#!/usr/bin/env bash
# Runs the CUDA backend's checks on the GPU machine, from the repository root, with the binary
# built elsewhere by tools/cuda/build.sh and carried along (carry: build-cuda/kite_cuda_tests
# and build-cuda/lib). Phases, each under its own time limit so the whole run ends inside one
# 10-minute call:
#   1. nvidia-smi
#   2. all tests (gtest XML and full log under $OUT)
#   3. compute-sanitizer memcheck and racecheck on the fast tests (when the tool exists)
#   4. the DISABLED_ benchmarks (CUDA-event medians)
# FAST, RACE (sanitizer filters) and BENCH (benchmark filter) may be overridden from the
# environment for a shorter, targeted run.
# A short summary table comes last on stdout; logs are in $OUT (cuda_tests.xml, cuda_tests.log,
# memcheck.log, racecheck.log, bench.log, nvidia-smi.txt).
set -uo pipefail
cd "$(dirname "$0")/../.."

OUT=${OUT:-/tmp/kite-cuda-out}
mkdir -p "$OUT"
BIN=./build-cuda/kite_cuda_tests
T_TESTS=${T_TESTS:-220}
T_MEMCHECK=${T_MEMCHECK:-150}
T_RACECHECK=${T_RACECHECK:-100}
T_BENCH=${T_BENCH:-90}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}  # CPU references

echo "== nvidia-smi"
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
cat "$OUT/nvidia-smi.txt"

if [ ! -x "$BIN" ]; then
  echo "missing $BIN: build it with tools/cuda/build.sh and carry build-cuda/kite_cuda_tests and build-cuda/lib"
  exit 1
fi
missing_libs=$(ldd "$BIN" | grep "not found" || true)
if [ -n "$missing_libs" ]; then
  echo "shared libraries not found:"
  echo "$missing_libs"
  exit 1
fi

summary=()

echo "== tests (limit ${T_TESTS}s)"
start=$(date +%s)
timeout "$T_TESTS" "$BIN" --gtest_output="xml:$OUT/cuda_tests.xml" >"$OUT/cuda_tests.log" 2>&1
rc=$?
head -3 "$OUT/cuda_tests.log"
grep -E "^\[  (PASSED|FAILED)|tests ran" "$OUT/cuda_tests.log" | sort -u | head -40
failed=$(grep -c "^\[  FAILED  \].*ms)$" "$OUT/cuda_tests.log" || true)
summary+=("tests: rc=$rc, $(grep -oE '[0-9]+ tests? from [0-9]+ test suites? ran' "$OUT/cuda_tests.log" | head -1), failed=$failed, $(( $(date +%s) - start ))s")
if [ "$rc" -ne 0 ]; then
  # The first failure messages, enough to act on.
  grep -B2 -A6 -E "Failure|error:|what\(\)" "$OUT/cuda_tests.log" | head -60
fi

FAST=${FAST:-'CudaAttentionMma.*:CudaMoeDispatch.*:Shapes/*:Configs/*:Vocabs/*:Cases/CudaDecodeAttentionTest.SplitK*:Cases/CudaPrefillAttentionTest.*:CudaAttention.*:CudaWriteCache.*:CudaEmbedding.*:CudaDeviceBuffer.RoundTrips*:CudaDeviceBuffer.Poison*:CudaFill.*'}
RACE=${RACE:-'CudaAttentionMma.PrefillRandomBatches:CudaAttentionMma.DecodeRandomBatches:CudaAttentionMma.DecodeMlaRandomBatches:CudaMoeDispatch.PermuteGather*:Shapes/CudaNormTest.*:Shapes/CudaRopeTest.*:Shapes/CudaRopeAndCacheTest.*:Configs/*:Cases/CudaDecodeAttentionTest.SplitK*:Vocabs/*'}
if command -v compute-sanitizer >/dev/null 2>&1; then
  for tool in memcheck racecheck; do
    filter=$FAST
    limit=$T_MEMCHECK
    if [ "$tool" = racecheck ]; then filter=$RACE; limit=$T_RACECHECK; fi
    echo "== compute-sanitizer --tool $tool (limit ${limit}s)"
    start=$(date +%s)
    timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 99 "$BIN" \
      --gtest_filter="$filter" >"$OUT/$tool.log" 2>&1
    rc=$?
    line=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/$tool.log" | tail -1)
    summary+=("$tool: rc=$rc ${line:-no summary (rc 124 = time limit)}, $(grep -c '^\[       OK' "$OUT/$tool.log") tests ok, $(( $(date +%s) - start ))s")
    grep -m 20 -E "=========  (Invalid|Race|Error|Program hit)" "$OUT/$tool.log" || true
  done
else
  summary+=("compute-sanitizer: not found, skipped")
fi

echo "== benchmarks (limit ${T_BENCH}s)"
timeout "$T_BENCH" "$BIN" --gtest_also_run_disabled_tests --gtest_filter="${BENCH:-*DISABLED_Bench*}" \
  >"$OUT/bench.log" 2>&1
rc=$?
summary+=("bench: rc=$rc")

echo
echo "== summary"
for line in "${summary[@]}"; do echo "$line"; done
echo
echo "benchmark                                      median time      achieved"
grep "^BENCH" "$OUT/bench.log" | sed 's/^BENCH //'
