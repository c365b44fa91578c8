#!/usr/bin/env bash
# Carried with the stripped quant_tests and lib/ (libspdlog.so.1.10, libfmt.so.9, libgomp.so.1)
# in .carry/quant/; run as: run(command="bash .carry/quant/run.sh", carry=[".carry/quant"]).
# Quantized-linear CUDA tests, bench and memcheck on the GPU machine; logs to $OUT.
cd "$(dirname "$0")"
export KITE_QUANT_TEST_VERBOSE=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee $OUT/smi.txt
echo "== tests"
timeout 60 ./quant_tests --gtest_filter='CudaQuantLinear.*' 2>&1 | tee $OUT/tests.log | grep -E "^\[ *(OK|FAILED|PASSED) |Failure|rel diff|Expected|Which is" | head -60
echo "max rel err per (format, out dtype):"
grep "rel err" $OUT/tests.log | awk '{f=$1; o=""; for(i=1;i<=NF;i++) if ($i ~ /^out=/) o=$i; k=f" "o; if (!(k in m) || $NF+0 > m[k]) {m[k]=$NF+0}; n++} END {for (k in m) print "  " k, m[k]; print "  cases:", n}'
echo "== bench"
timeout 60 ./quant_tests --gtest_also_run_disabled_tests --gtest_filter='*Bench*' 2>&1 | tee $OUT/bench.log | grep -vE "^\[|^Note|^$"
echo "== memcheck (all CudaQuantLinear tests, decode ones included)"
timeout 90 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --print-limit 5 ./quant_tests --gtest_filter='CudaQuantLinear.*' > $OUT/memcheck.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | tail -5
