#!/usr/bin/env bash
# Builds only the quantized-linear kernels and their test (build-q/quant_tests) with nvcc/g++,
# linking the libkite_lib.a / libkite_cuda.a of an earlier build-cuda (copied to $PREBUILT,
# default build-q/prebuilt) instead of a full CMake build: quick iteration on those kernels
# (tools/cuda/quant_run_on_device.sh runs the result on the GPU machine).
set -euo pipefail
cd "$(dirname "$0")/../.."
NVCC=/usr/local/cuda/bin/nvcc
FLAGS="-std=c++20 -O3 -DNDEBUG -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I src -Xcompiler=-Wall"
CXX="g++ -std=c++20 -O2 -Wall -I src -I /usr/local/cuda/include"
Q=src/kernels/cuda/quant
mkdir -p build-q/obj
newer() { [ "$1" -nt "$2" ] && { [ -z "${3:-}" ] || [ "$1" -nt "$3" ]; }; }
newer build-q/obj/quant_weights.o $Q/quant_weights.cu $Q/quant_linear.h ||
  $NVCC $FLAGS -c $Q/quant_weights.cu -o build-q/obj/quant_weights.o
newer build-q/obj/quant_linear.o $Q/quant_linear.cu $Q/quant_linear.h $Q/quant_kernel.cuh ||
  $NVCC $FLAGS -c $Q/quant_linear.cu -o build-q/obj/quant_linear.o
newer build-q/obj/quant_gemv_bulk.o $Q/quant_gemv_bulk.cu $Q/quant_kernel.cuh ||
  $NVCC $FLAGS -c $Q/quant_gemv_bulk.cu -o build-q/obj/quant_gemv_bulk.o
newer build-q/obj/quant_activation.o $Q/quant_activation.cu $Q/quant_activation.h ||
  $NVCC $FLAGS -c $Q/quant_activation.cu -o build-q/obj/quant_activation.o
newer build-q/obj/fp8_scale.o $Q/fp8_scale.cu || $NVCC $FLAGS -c $Q/fp8_scale.cu -o build-q/obj/fp8_scale.o
newer build-q/obj/w4_dequant.o $Q/w4_dequant.cu $Q/w4_dequant.h ||
  $NVCC $FLAGS -c $Q/w4_dequant.cu -o build-q/obj/w4_dequant.o
newer build-q/obj/fp8_gemm_lt.o $Q/fp8_gemm_lt.cpp $Q/fp8_gemm_lt.h ||
  $CXX -c $Q/fp8_gemm_lt.cpp -o build-q/obj/fp8_gemm_lt.o
TESTS="quant_linear_test quant_activation_forms_test quant_gated_split_test"
for t in $TESTS; do
  newer build-q/obj/$t.o tests/cuda/$t.cpp $Q/quant_linear.h ||
    $CXX -c tests/cuda/$t.cpp -o build-q/obj/$t.o
done
newer build-q/obj/main.o tests/cuda/main.cpp || $CXX -c tests/cuda/main.cpp -o build-q/obj/main.o
g++ -o build-q/quant_tests $(for t in $TESTS; do echo build-q/obj/$t.o; done) build-q/obj/main.o \
  build-q/obj/quant_linear.o build-q/obj/quant_gemv_bulk.o build-q/obj/quant_weights.o \
  build-q/obj/quant_activation.o \
  build-q/obj/fp8_scale.o build-q/obj/fp8_gemm_lt.o build-q/obj/w4_dequant.o \
  "${PREBUILT:-build-q/prebuilt}/libkite_cuda.a" "${PREBUILT:-build-q/prebuilt}/libkite_lib.a" \
  -Wl,--as-needed -lgtest -L/usr/local/cuda/lib64 -lcublasLt -lcudart_static -lspdlog -lfmt \
  -lgomp -lpthread -ldl -lrt -Wl,-rpath,'$ORIGIN/lib:/usr/local/cuda/lib64'
echo built build-q/quant_tests
