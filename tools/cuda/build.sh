#!/usr/bin/env bash
# Builds the CUDA backend, its test binary and the kite binary with the CUDA backend in
# build-cuda/ (Release, -DKITE_CUDA=ON) on a machine with nvcc and no GPU, then bundles the
# shared libraries the GPU machine may lack into build-cuda/lib/ (the binaries' RPATH is
# $ORIGIN/lib, then /usr/local/cuda/lib64).
#
# To run on the GPU machine, carry build-cuda/kite_cuda_tests, build-cuda/kite and
# build-cuda/lib (see tools/cuda/run_on_device.sh and tools/cuda/model_bench.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."

JOBS=${JOBS:-2}
export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build-cuda -G Ninja -DKITE_CUDA=ON -DKITE_BLAS=OFF -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >/dev/null
cmake --build build-cuda -j"$JOBS" --target kite_cuda_tests kite

# Bundle every shared library outside glibc/libstdc++/libgcc and outside the CUDA toolkit
# (the GPU machine has CUDA 13 in /usr/local/cuda/lib64): OpenMP, OpenBLAS, spdlog/fmt, PCRE2,
# xxHash — what the CPU reference kernels, the loaders and the server use.
mkdir -p build-cuda/lib
rm -f build-cuda/lib/*
ldd build-cuda/kite_cuda_tests build-cuda/kite | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
  case "$name" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
    libcublas*|libcudart*|libnvidia*|libcuda.so*) ;;
    *) cp -L "$path" "build-cuda/lib/$name" ;;
  esac
done

# The kernel-timeline injection library (kernel_trace.cpp) and the CUPTI it loads.
g++ -std=c++17 -O2 -shared -fPIC -I/usr/local/cuda/include tools/cuda/kernel_trace.cpp \
  -o build-cuda/lib/libkite_trace.so -L/usr/local/cuda/lib64 -lcupti -Wl,-rpath,'$ORIGIN'
cp -L /usr/local/cuda/lib64/libcupti.so.13 build-cuda/lib/

# Symbols are not needed there, and every megabyte counts against the 64 MiB that travels.
strip --strip-unneeded build-cuda/kite_cuda_tests build-cuda/kite

# PREV_KITE=PATH: another commit's kite binary (built by this script before) travels too, as
# build-cuda/kite_prev, for same-call A/Bs across commits (quant_decode_ab.sh: KITE_BIN). Its
# bundled libraries must be the same set as this build's (they are unless a dependency changed).
if [ -n "${PREV_KITE:-}" ]; then
  [ "$(realpath "$PREV_KITE")" = "$(realpath -m build-cuda/kite_prev)" ] ||
    cp "$PREV_KITE" build-cuda/kite_prev
  strip --strip-unneeded build-cuda/kite_prev
else
  rm -f build-cuda/kite_prev
fi

# The same, compressed, for the trip to the GPU machine (tools/cuda/model_bench.sh unpacks it).
# xz -9e: the device tool's 64 MiB holds the tracked files too (59.6 MB on 2026-12-07), and the
# default level's 8.2 MB with kite_prev did not fit beside them; -9e makes it 5.1 MB, in ~20 s.
tar cf - build-cuda/kite build-cuda/kite_cuda_tests build-cuda/lib \
  $( [ -f build-cuda/kite_prev ] && echo build-cuda/kite_prev ) | xz -9e -T2 >build-cuda/bundle.tar.xz

echo "== build-cuda/kite_cuda_tests"
ls -la build-cuda/kite_cuda_tests
echo "needed: $(readelf -d build-cuda/kite_cuda_tests | awk '/NEEDED/ {gsub(/[\[\]]/, "", $5); printf "%s ", $5}')"
echo "rpath:  $(readelf -d build-cuda/kite_cuda_tests | awk '/RUNPATH|RPATH/ {print $5}')"
echo "bundled: $(ls build-cuda/lib | tr '\n' ' ')"
echo "carry size: $(du -cb build-cuda/kite_cuda_tests build-cuda/kite build-cuda/lib | tail -1 | cut -f1) bytes" \
  "uncompressed; bundle.tar.xz $(stat -c %s build-cuda/bundle.tar.xz) bytes"
