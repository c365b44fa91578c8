# Sourced, from the repository root, by the tools/cuda scripts that run on the GPU machine:
# unpacks the binaries when they travelled as one archive (build-cuda/bundle.tar.xz, made by
# tools/cuda/build.sh to stay under the 64 MiB the device tool carries), makes $OUT (default
# /tmp/kite_out) and puts the bundled libraries, then CUDA's, on the library path.
[ -f build-cuda/bundle.tar.xz ] && tar xJf build-cuda/bundle.tar.xz
OUT=${OUT:-/tmp/kite_out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/build-cuda/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
