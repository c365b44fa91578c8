#!/usr/bin/env bash
# Model-level GPU run (issue 6), from the repository root on the GPU machine, after
# `bash tools/cuda/build.sh` here (carry build-cuda/kite, build-cuda/kite_cuda_tests,
# build-cuda/lib). Steps, each bounded by `timeout`, all logged to $OUT/model_bench.log:
#   REGEN_FIXTURES=1  tools/fixtures/make_model_fixtures.py (transformers) -> $OUT/fixtures.tgz
#   kite_cuda_tests --gtest_filter=$TEST_FILTER (default: the model tests)
#   kite bench latency on the Llama-3-8B and DeepSeek-V2-Lite shapes (dummy BF16 weights)
#   EAGER_AB=1  the same with --enforce-eager (no CUDA graphs), KITE_CUDA_NO_PDL=1 (no
#               programmatic dependent launch) / --host-sampling, for A/B
#   GEMV_AB=1  batch-1 decode with each decode GEMV kernel (KITE_CUDA_GEMV; GEMV_KERNELS)
#   BULK_MIN_AB=1  batch-1 decode with the bulk GEMV from 40 MB (o on the warp kernel) / 32 MB
#   PDL_AB=1  batch-1 decode with PDL for the GEMVs only (default) / all decode kernels / none
#   SPLIT_AB=1  batch-1 decode with decode attention's old minimum split (256 keys) and the new
#               (GQA: KITE_CUDA_DECODE_SPLIT_KEYS on Llama; MLA: KITE_CUDA_MLA_SPLIT_KEYS on
#               DeepSeek-V2-Lite, also at batch 8 with 2048-token prompts)
#   QUANT=1  batch-1 decode with --quantization fp8 / int8 / int4 (dummy quantized weights),
#            and with --kv-cache-dtype fp8 (the log's "KV cache:" lines give the capacity)
#   QUANT_THROUGHPUT=1  throughput at 128 concurrent, BF16 vs FP8 weights (KV_DTYPES="auto fp8"
#                       adds the FP8 KV cache to each)
#   BENCH_THROUGHPUT=1  kite bench throughput, Llama-3-8B shape
#   HF_PEER=1  tools/bench/hf_peer.py on the same shapes (transformers eager / compiled)
set -uo pipefail
source tools/cuda/device_env.sh
LOG="$OUT/model_bench.log"
step() { echo "== $(date +%T) $*" | tee -a "$LOG"; }
run() { step "$*"; "$@" >>"$LOG" 2>&1; echo "   exit $?" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv >>"$LOG" 2>&1

if [ "${REGEN_FIXTURES:-0}" = 1 ]; then
  run timeout 300 python3 tools/fixtures/make_model_fixtures.py --out tests/fixtures/models
  tar czf "$OUT/fixtures.tgz" tests/fixtures/models
fi
if [ -n "${TEST_FILTER-x}" ]; then
  run timeout "${T_TESTS:-240}" ./build-cuda/kite_cuda_tests --gtest_filter="${TEST_FILTER:-*CudaModel*:*CudaLinear*}"
fi

LLAMA=tools/bench/configs/llama3_8b
DSV2=tools/bench/configs/deepseek_v2_lite
lat() {  # name model batch input output [extra kite flags...]
  local name=$1 model=$2 batch=$3 input=$4 output=$5
  shift 5
  run timeout "${T_BENCH:-150}" ./build-cuda/kite bench latency --model "$model" --load-format dummy \
    --device cuda --batch-size "$batch" --input-len "$input" --output-len "$output" \
    --iters "${ITERS:-3}" --max-num-batched-tokens "${MAX_BATCHED:-2048}" "$@" \
    --result-json "$OUT/lat_$name.json"
  cat "$OUT/lat_$name.json" >>"$LOG" 2>/dev/null; echo >>"$LOG"
}
if [ "${BENCH_LATENCY:-1}" = 1 ]; then
  lat llama_b1 $LLAMA 1 512 64
  lat dsv2lite_b1 $DSV2 1 512 64
  [ "${BATCH64:-1}" = 1 ] && lat llama_b64 $LLAMA 64 128 64
fi
# A/B in the same session: CUDA graphs off (--enforce-eager), and logits sampled on the host.
if [ "${EAGER_AB:-0}" = 1 ]; then
  lat llama_b1_eager $LLAMA 1 512 64 --enforce-eager
  KITE_CUDA_NO_PDL=1 lat llama_b1_nopdl $LLAMA 1 512 64
  lat dsv2lite_b1_eager $DSV2 1 512 64 --enforce-eager
  [ "${BATCH64:-1}" = 1 ] && lat llama_b64_eager $LLAMA 64 128 64 --enforce-eager
  [ "${BATCH64:-1}" = 1 ] && lat llama_b64_host_sampling $LLAMA 64 128 64 --host-sampling
fi
# The decode GEMV kernels (KITE_CUDA_GEMV, gemm/gemv.h) at model level, same session.
if [ "${GEMV_AB:-0}" = 1 ]; then
  for g in ${GEMV_KERNELS:-warp bulk}; do
    KITE_CUDA_GEMV=$g lat "llama_b1_gemv_$g" $LLAMA 1 512 64
    KITE_CUDA_GEMV=$g lat "dsv2lite_b1_gemv_$g" $DSV2 1 512 64
  done
fi
# The bulk GEMV's size threshold (KITE_CUDA_GEMV_BULK_MIN): 40 MB leaves Llama's o (33.5 MB)
# to the warp kernel.
if [ "${BULK_MIN_AB:-0}" = 1 ]; then
  KITE_CUDA_GEMV_BULK_MIN=40000000 lat llama_b1_bulk_min40 $LLAMA 1 512 64
  lat llama_b1_bulk_min32 $LLAMA 1 512 64
fi
# Programmatic dependent launch for the small decode kernels (on by default; KITE_CUDA_PDL_ALL=0
# launches them plainly), twice each, interleaved.
if [ "${PDL_AB:-0}" = 1 ]; then
  for i in 1 2; do
    KITE_CUDA_PDL_ALL=0 lat "llama_b1_pdl_gemv_$i" $LLAMA 1 512 64
    lat "llama_b1_pdl_all_$i" $LLAMA 1 512 64
  done
  KITE_CUDA_NO_PDL=1 lat llama_b1_pdl_none $LLAMA 1 512 64
fi
# Decode attention's split size at batch 1 (KITE_CUDA_DECODE_SPLIT_KEYS: 256 was the default).
if [ "${SPLIT_AB:-0}" = 1 ]; then
  KITE_CUDA_DECODE_SPLIT_KEYS=256 lat llama_b1_split256 $LLAMA 1 512 64
  lat llama_b1_split64 $LLAMA 1 512 64
  KITE_CUDA_MLA_SPLIT_KEYS=256 lat dsv2lite_b1_split256 $DSV2 1 512 64
  lat dsv2lite_b1_split32 $DSV2 1 512 64
  KITE_CUDA_MLA_SPLIT_KEYS=256 lat dsv2lite_b8_2k_split256 $DSV2 8 2048 64
  lat dsv2lite_b8_2k_split32 $DSV2 8 2048 64
fi
# Quantized weights (issue 7), same session: batch-1 decode per format, then offline
# throughput at 128 concurrent, BF16 vs FP8.
if [ "${QUANT:-0}" = 1 ]; then
  for q in fp8 int8 int4; do lat "llama_b1_$q" $LLAMA 1 512 64 --quantization $q; done
  lat llama_b1_kvfp8 $LLAMA 1 512 64 --kv-cache-dtype fp8
  lat llama_b64_kvfp8 $LLAMA 64 128 64 --kv-cache-dtype fp8
fi
if [ "${QUANT_THROUGHPUT:-0}" = 1 ]; then
  for q in none fp8; do
    for kv in ${KV_DTYPES:-auto}; do
      run timeout "${T_THROUGHPUT:-300}" ./build-cuda/kite bench throughput --model $LLAMA \
        --load-format dummy --device cuda --input-len 1000 --output-len 1000 --num-prompts 128 \
        --max-num-seqs 128 --max-num-batched-tokens 8192 --quantization $q --kv-cache-dtype $kv \
        --result-json "$OUT/thr_llama_128_${q}_$kv.json"
      cat "$OUT/thr_llama_128_${q}_$kv.json" >>"$LOG" 2>/dev/null
    done
  done
fi
if [ "${BENCH_THROUGHPUT:-0}" = 1 ]; then
  run timeout "${T_THROUGHPUT:-300}" ./build-cuda/kite bench throughput --model $LLAMA \
    --load-format dummy --device cuda --input-len 1000 --output-len 1000 --num-prompts 256 \
    --max-num-seqs 256 --max-num-batched-tokens 8192 --result-json "$OUT/thr_llama.json"
  cat "$OUT/thr_llama.json" >>"$LOG" 2>/dev/null
fi
if [ "${HF_PEER:-0}" = 1 ]; then
  run timeout "${T_PEER:-300}" python3 tools/bench/hf_peer.py --config $LLAMA --batch 1 64 \
    --input-len 512 --output-len 32 ${HF_COMPILE:+--compile} --out "$OUT/hf_peer.json"
fi
# Keep at most 8 files in $OUT.
rm -f "$OUT"/lat_*.json "$OUT"/thr_*.json
ls -la "$OUT"
