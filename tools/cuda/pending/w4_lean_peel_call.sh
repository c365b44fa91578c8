#!/usr/bin/env bash
# The device call that decides w4_lean_peel.patch (README here), on the GPU machine from the
# repository root. Built here first, in this order:
#   bash tools/cuda/build.sh && cp build-cuda/kite /tmp/kite_main      # main's kite
#   git apply tools/cuda/pending/w4_lean_peel.patch
#   PREV_KITE=/tmp/kite_main bash tools/cuda/build.sh                   # the peel, main beside it
# then `run` with carry ["build-cuda/bundle.tar.xz"] and this script as the command (~3 min on
# an H200).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source tools/cuda/device_env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
# 1. The CPU-reference tests with the peel on every token-tile form (1-3 tiles: 1-24 rows), the
#    INT8 fold case whose reference changed on 2026-12-07 first.
timeout 60 ./build-cuda/kite_cuda_tests --gtest_filter='CudaNormFold*' >"$OUT/tests_fold.log" 2>&1
echo "fold tests exit $?"; tail -1 "$OUT/tests_fold.log"
timeout 240 ./build-cuda/kite_cuda_tests --gtest_filter='CudaQuant*:CudaMoe*' >"$OUT/tests_peel.log" 2>&1
echo "quant tests exit $?"; tail -1 "$OUT/tests_peel.log"; grep '^\[  FAILED' "$OUT/tests_peel.log" | head
# 2. The SASS of the one-tile gated loop (instructions a pair, where the code loads sit).
cuobjdump -sass build-cuda/kite_cuda_tests 2>/dev/null |
  awk '/Function :/ {keep = ($0 ~ /qdec_w4_lean_kernel/ && $0 ~ /Lb1ELi1E/)} keep' |
  xz -9 >"$OUT/sass_lean.txt.xz"
# 3. Batch 1 (8-bit lm_head) and batch 8, main's build against the peel, three interleaved rounds.
H8="--quantization int4 --lm-head-quantization int8"
CASES="bf16:1:;|main_h8:1:$H8;KITE_BIN=build-cuda/kite_prev|peel_h8:1:$H8;|main_b8:8:--quantization int4;KITE_BIN=build-cuda/kite_prev|peel_b8:8:--quantization int4;" \
  ROUNDS=3 TEST_FILTER= T_BENCH=50 timeout 240 bash tools/cuda/quant_decode_ab.sh
ls "$OUT"  # five files: the two test logs, the SASS, the A/B log and its runs' JSON archive
