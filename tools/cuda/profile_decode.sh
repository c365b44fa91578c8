#!/usr/bin/env bash
# GPU time per backend op of decode steps (issue 6's "where the time goes"), on the GPU machine
# from the repository root after `bash tools/cuda/build.sh` here (carry
# build-cuda/bundle.tar.xz). Runs `kite bench latency` at batch 1 (512-token prompt) on the
# Llama-3-8B and DeepSeek-V2-Lite shapes with KITE_CUDA_OP_TIMES=1 (op_timer.h: CUDA events
# around every op, steps run eagerly) and writes each op table to $OUT/ops_<shape>.txt.
# Prefill ops show up with M = 512 in their labels; decode ops with M = 1. Then the same steps
# as CUDA graphs under the kernel timeline library (kernel_trace.cpp), each kernel's start and
# end in $OUT/trace_<shape>.csv.xz; `python3 tools/cuda/kernel_trace_report.py FILE` (after
# unxz, on the development machine: it needs c++filt) says where a replay's time goes.
set -uo pipefail
source tools/cuda/device_env.sh
prof() {  # name model [extra flags]
  local name=$1 model=$2
  shift 2
  KITE_CUDA_OP_TIMES=1 timeout "${T_PROF:-120}" ./build-cuda/kite bench latency --model "$model" \
    --load-format dummy --device cuda --batch-size "${BATCH:-1}" --input-len 512 \
    --output-len "${OUTPUT_LEN:-64}" --iters 1 "$@" >"$OUT/ops_$name.txt" 2>&1
  echo "$name exit $?"
}
prof llama_b1 tools/bench/configs/llama3_8b
prof dsv2lite_b1 tools/bench/configs/deepseek_v2_lite
trace() {  # name model [extra flags]
  local name=$1 model=$2
  shift 2
  CUDA_INJECTION64_PATH="$PWD/build-cuda/lib/libkite_trace.so" KITE_TRACE_OUT="$OUT/trace_$name.csv" \
    timeout "${T_PROF:-120}" ./build-cuda/kite bench latency --model "$model" --load-format dummy \
    --device cuda --batch-size "${BATCH:-1}" --input-len 512 --output-len "${OUTPUT_LEN:-64}" \
    --iters 1 "$@" >/dev/null 2>&1
  echo "$name trace exit $?"
  xz -9f "$OUT/trace_$name.csv"
}
trace llama_b1 tools/bench/configs/llama3_8b
trace dsv2lite_b1 tools/bench/configs/deepseek_v2_lite
