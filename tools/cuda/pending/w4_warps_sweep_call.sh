#!/usr/bin/env bash
# The device call for w4_warps_sweep.patch (NOTES_2026-12.md, sixtieth entry), from the
# repository root after `git apply tools/cuda/pending/w4_warps_sweep.patch` and
# `bash tools/cuda/build.sh`: the quantized tests under the 56-register cap, then Llama-3-8B
# W4A16 h8 decode with each W4 GEMV shape's warps a tile swept (KITE_CUDA_W4_KW, form as main)
# and main's loop under 56 / 48 registers (KITE_CUDA_W4_REGS) with the gated blocks' warps a half
# (KITE_CUDA_W4_GATED_KWT), interleaved with main's defaults. ~2 s a case a round.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/cuda/device_env.sh
H8="--quantization int4 --lm-head-quantization int8"
QKV=6144:4096; O=4096:4096; DN=4096:14336
C="bf16:1:;|main:1:$H8;"
for k in 2 3 6 8; do C="$C|g$k:1:$H8;KITE_CUDA_W4_GATED_KWT=$k"; done
for k in 4 6 16; do C="$C|qkv$k:1:$H8;KITE_CUDA_W4_KW=$QKV:$k"; done
for k in 4 8 12; do C="$C|o$k:1:$H8;KITE_CUDA_W4_KW=$O:$k"; done
for k in 8 12; do C="$C|dn$k:1:$H8;KITE_CUDA_W4_KW=$DN:$k"; done
for r in 56 48 40; do C="$C|r$r:1:$H8;KITE_CUDA_W4_REGS=$r"; done
for k in 2 3; do C="$C|r56g$k:1:$H8;KITE_CUDA_W4_REGS=56 KITE_CUDA_W4_GATED_KWT=$k"; done
C="$C|r48g3:1:$H8;KITE_CUDA_W4_REGS=48 KITE_CUDA_W4_GATED_KWT=3"
C="$C|main_b8:8:$H8;|r56g3_b8:8:$H8;KITE_CUDA_W4_REGS=56 KITE_CUDA_W4_GATED_KWT=3"
S=$OUT/tests.log
for env in "KITE_CUDA_W4_REGS=56" "KITE_CUDA_W4_REGS=56 KITE_CUDA_W4_GATED_KWT=3"; do
  env $env timeout 60 ./build-cuda/kite_cuda_tests --gtest_filter='CudaQuant*' >/tmp/t.log 2>&1
  echo "$env: tests exit $? ok $(grep -c '^\[       OK' /tmp/t.log) failed $(grep -c '^\[  FAILED  \].*ms)' /tmp/t.log)" >>"$S"
  grep -E '^\[  FAILED  \]' /tmp/t.log >>"$S"
done
CASES="$C" ROUNDS=2 TEST_FILTER= T_BENCH=30 bash tools/cuda/quant_decode_ab.sh
