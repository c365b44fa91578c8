#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer (g++, build-asan/, -DKITE_SANITIZE=ON): builds
# kite and kite_tests and runs the CPU test suite in one process. The server tests start the
# sanitized `kite serve` (build-asan/kite), so the server is checked too, including LeakSanitizer
# at its exit after SIGTERM. Any report fails the run (-fno-sanitize-recover, halt_on_error).
# KITE_ASAN_FILTER: a gtest filter (default: every test).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
FILTER=${KITE_ASAN_FILTER:-*}

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKITE_SANITIZE=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target kite kite_tests

export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export KITE_BIN=$PWD/$BUILD_DIR/kite
# Fewer simultaneous streams than the normal suite's 200: each ASan'd stream costs more.
export KITE_SERVER_TEST_STREAMS=${KITE_SERVER_TEST_STREAMS:-100}
"$BUILD_DIR/kite_tests" --gtest_filter="$FILTER" --gtest_brief=1
