#!/usr/bin/env bash
# The test command: every CPU test (unit, model fixtures, end to end) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
[ -x "$BUILD_DIR/kite_tests" ] || bash scripts/setup.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)"
