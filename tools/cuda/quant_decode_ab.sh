#!/usr/bin/env bash
# Issue 7's batch-1 decode ratios on the GPU machine, from the repository root, after
# `bash tools/cuda/build.sh` here (carry build-cuda/bundle.tar.xz): the quantized tests, then
# Llama-3-8B (dummy weights) decode at batch 1 in BF16 and each quantized form, with the
# A/B switches of the quantized decode path measured in the same call. Rounds are interleaved
# (ROUNDS, default 2) so a drift of the machine shows as a spread, not as a ratio.
# Logs and each run's JSON go to $OUT; a table of p50 ms per step comes last on stdout.
#   TEST_FILTER  gtest filter run first ('' skips; default the quantized tests)
#   CASES        which runs, '|'-separated name:batch:flags;env entries (default below); an
#                env entry KITE_BIN=PATH runs that binary instead of build-cuda/kite (an A/B
#                against another commit's build: `PREV_KITE=PATH bash tools/cuda/build.sh`
#                bundles one as build-cuda/kite_prev)
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/cuda/device_env.sh
LOG="$OUT/quant_decode_ab.log"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv >>"$LOG" 2>&1

if [ -n "${TEST_FILTER-x}" ]; then
  echo "== $(date +%T) tests ${TEST_FILTER:-CudaQuant*}" | tee -a "$LOG"
  timeout "${T_TESTS:-300}" ./build-cuda/kite_cuda_tests --gtest_filter="${TEST_FILTER:-CudaQuant*}" \
    >"$OUT/quant_tests.log" 2>&1
  echo "   exit $? ($(grep -c '^\[       OK' "$OUT/quant_tests.log") ok," \
    "$(grep -c '^\[  FAILED  \].*ms)' "$OUT/quant_tests.log") failed)" | tee -a "$LOG"
fi

LLAMA=${MODEL:-tools/bench/configs/llama3_8b}
# name:batch:kite flags;environment
DEFAULT_CASES=(
  "bf16:1:;"
  "fp8:1:--quantization fp8;"
  "fp8_lmhead:1:--quantization fp8 --quantize-lm-head;"
  "int8:1:--quantization int8;"
  "int8_lmhead:1:--quantization int8 --quantize-lm-head;"
  "int4:1:--quantization int4;"
  "int4_ungated:1:--quantization int4;KITE_CUDA_QGEMV_GATED=0"
  "int4_lmhead:1:--quantization int4 --quantize-lm-head;"
  "int4_lmhead8:1:--quantization int4 --lm-head-quantization int8;"
  "int4_b8:8:--quantization int4;"
  "int4_b8_ungated:8:--quantization int4;KITE_CUDA_QGEMV_GATED=0"
)
if [ -n "${CASES:-}" ]; then IFS='|' read -r -a RUNS <<<"$CASES"; else RUNS=("${DEFAULT_CASES[@]}"); fi
for round in $(seq 1 "${ROUNDS:-2}"); do
  for c in "${RUNS[@]}"; do
    name=${c%%:*}; rest=${c#*:}; batch=${rest%%:*}; rest=${rest#*:}
    flags=${rest%%;*}; envs=${rest#*;}
    echo "== $(date +%T) round $round $name (batch $batch, $flags ${envs:+env $envs})" | tee -a "$LOG"
    bin=./build-cuda/kite
    for kv in $envs; do case $kv in KITE_BIN=*) bin=${kv#KITE_BIN=} ;; esac; done
    # shellcheck disable=SC2086
    env $envs timeout "${T_BENCH:-150}" "$bin" bench latency --model "$LLAMA" \
      --load-format dummy --device cuda --batch-size "$batch" --input-len 512 --output-len 64 \
      --iters 3 $flags --result-json "$OUT/${name}_r$round.json" >>"$LOG" 2>&1
    echo "   exit $?" | tee -a "$LOG"
  done
done

echo "== p50 ms per decode step (then per prefill, in brackets)"
for c in "${RUNS[@]}"; do
  name=${c%%:*}
  printf '%-14s' "$name"
  for round in $(seq 1 "${ROUNDS:-2}"); do
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['result']; print('%9.3f [%7.2f]' % (r['decode_ms_per_step']['p50'], r['prefill_ms']['p50']), end='')" \
      "$OUT/${name}_r$round.json" 2>/dev/null || printf '%9s' "-"
  done
  echo
done
# compute-sanitizer memcheck on chosen tests (MEMCHECK: a gtest filter).
if [ -n "${MEMCHECK:-}" ]; then
  echo "== $(date +%T) memcheck $MEMCHECK" | tee -a "$LOG"
  timeout "${T_MEMCHECK:-240}" compute-sanitizer --tool memcheck --error-exitcode 9 \
    ./build-cuda/kite_cuda_tests --gtest_filter="$MEMCHECK" >"$OUT/memcheck.log" 2>&1
  echo "   exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/memcheck.log") clean summaries)" | tee -a "$LOG"
fi
# The quantized linears' kernel table (M = 1..8, each kernel path; CudaQuantLinearBench).
if [ "${KERNEL_BENCH:-0}" = 1 ]; then
  echo "== $(date +%T) kernel bench" | tee -a "$LOG"
  timeout "${T_KBENCH:-180}" ./build-cuda/kite_cuda_tests --gtest_also_run_disabled_tests \
    --gtest_filter='CudaQuantLinearBench.DISABLED_Bench' >"$OUT/quant_kernel_bench.log" 2>&1
  echo "   exit $?" | tee -a "$LOG"
fi
# The device tool brings back at most 8 files: the runs' JSON travel as one archive.
tar czf "$OUT/quant_decode_ab_json.tgz" -C "$OUT" $(cd "$OUT" && ls ./*_r*.json) && rm -f "$OUT"/*_r*.json
