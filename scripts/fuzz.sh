#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan; build-fuzz/) and runs each
# for a bounded time on its committed seed corpus (tests/fuzz/corpus/<target>/). Any crash,
# sanitizer report, leak, timeout (>10 s on one input) or out-of-memory (>2 GiB) fails it; the
# input that did it is left in build-fuzz/fuzz-artifacts/ (reproduce: build-fuzz/fuzz_<target>
# <that file>). New inputs found go to build-fuzz/fuzz-work/<target>/, never into the corpus.
#
#   bash scripts/fuzz.sh                      # every target, 25 s each (CI)
#   KITE_FUZZ_SECONDS=600 bash scripts/fuzz.sh tokenizer chat_template
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
SECS=${KITE_FUZZ_SECONDS:-25}

cmake -S . -B "$BUILD_DIR" -G Ninja -DKITE_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target fuzz_targets

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for d in tests/fuzz/corpus/*/; do targets+=("$(basename "$d")"); done
fi
mkdir -p "$BUILD_DIR/fuzz-artifacts"
failed=()
for t in "${targets[@]}"; do
  bin=$BUILD_DIR/fuzz_$t
  work=$BUILD_DIR/fuzz-work/$t
  mkdir -p "$work"
  log=$BUILD_DIR/fuzz-$t.log
  # Leaks are checked (detect_leaks=1); halt_on_error makes any UBSan report a crash.
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
     "$bin" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$BUILD_DIR/fuzz-artifacts/$t-" \
       "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    echo "fuzz $t: ok, $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" |
      grep -o '[0-9]*$') runs in ${SECS} s, $(grep -o 'cov: [0-9]*' "$log" | tail -1)"
  else
    echo "fuzz $t: FAILED (log: $log)"
    grep -A30 -m1 'ERROR\|==ERROR\|runtime error\|deadly signal\|Timeout\|out-of-memory' "$log" |
      head -60 || tail -40 "$log"
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failures in ${failed[*]}"
  exit 1
fi
