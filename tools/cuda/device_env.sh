# Sourced, from the repository root, by the tools/cuda scripts that run on the GPU machine:
# unpacks the binaries when they travelled as one archive (build-cuda/bundle.tar.xz, made by
# tools/cuda/build.sh to stay under the 64 MiB the device tool carries), makes $OUT (default
# /tmp/kite_out) and puts the bundled libraries, then CUDA's, on the library path.
[ -f build-cuda/bundle.tar.xz ] && tar xJf build-cuda/bundle.tar.xz
OUT=${OUT:-/tmp/kite_out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/build-cuda/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"

# The URL a `kite serve --port 0` started in the background (pid $2) prints to its log $1, once
# it listens; empty if it exits first or is not up within 60 s (model load and profiling step).
server_url() {
  local url=""
  for _ in $(seq 1 600); do
    url=$(grep -o 'http://127.0.0.1:[0-9]*' "$1" 2>/dev/null | head -1 || true)
    [ -n "$url" ] && break
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  echo "$url"
}
