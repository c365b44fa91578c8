#!/usr/bin/env bash
# `kite serve` under load on the GPU machine: Llama-3-8B (dummy weights) behind the HTTP
# server, `kite bench serve` sweeping request rates against it, one server per configuration.
# Run from the repository root after `bash tools/cuda/build.sh` here (carry
# build-cuda/bundle.tar.xz). Each configuration's server log, each rate's JSON and a summary
# line per rate go to $OUT; the summary also goes to stdout. Every rate sends prompts of its
# own seed (random token ids: no prefix is shared, within a rate or across rates).
#   CONFIGS   '|'-separated name:kite serve flags (default below)
#   RATES     request rates, comma-separated (default 8,24)
#   PROMPTS   requests per rate (default 240); INPUT_LEN / OUTPUT_LEN (default 1024 / 128)
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/cuda/device_env.sh
MODEL=${MODEL:-tools/bench/configs/llama3_8b}
DEFAULT_CONFIGS="bf16:|bf16_chunk8192:--max-num-batched-tokens 8192|fp8:--quantization fp8|int4:--quantization int4"
IFS='|' read -r -a RUNS <<<"${CONFIGS:-$DEFAULT_CONFIGS}"
for c in "${RUNS[@]}"; do
  name=${c%%:*}; flags=${c#*:}
  log="$OUT/serve_$name.log"
  # shellcheck disable=SC2086
  ./build-cuda/kite serve --model "$MODEL" --load-format dummy --device cuda --port 0 $flags >"$log" 2>&1 &
  pid=$!
  url=$(server_url "$log" "$pid")
  if [ -z "$url" ]; then echo "$name: server did not start"; tail -3 "$log"; continue; fi
  # A seed per rate: the same prompts again would hit the prefix cache the rate before filled.
  : >"$OUT/bench_$name.txt"
  IFS=',' read -r -a rates <<<"${RATES:-8,24}"
  for i in "${!rates[@]}"; do
    timeout "${T_BENCH:-240}" ./build-cuda/kite bench serve --url "$url" --dataset random \
      --input-len "${INPUT_LEN:-1024}" --output-len "${OUTPUT_LEN:-128}" \
      --num-prompts "${PROMPTS:-240}" --request-rate "${rates[$i]}" --seed "$((i + 1))" \
      --result-json "$OUT/bench_${name}_${rates[$i]}.json" >>"$OUT/bench_$name.txt" 2>&1
    echo "$name ($flags) rate ${rates[$i]}: bench exit $?"
  done
  kill "$pid"; wait "$pid" 2>/dev/null
  # One line per rate: name, rate, then the figures (ms; throughputs per s).
  awk -v n="$name" '/Serving Benchmark Result/ {match($0, /rate [^ ]+/); r = substr($0, RSTART + 5, RLENGTH - 5)}
    /^Failed requests/ {f = $NF} /^Request throughput/ {rt = $NF} /^Output token throughput/ {ot = $NF}
    /^P50 TTFT/ {t50 = $NF} /^P99 TTFT/ {t99 = $NF} /^P50 TPOT/ {p50 = $NF} /^P99 TPOT/ {p99 = $NF}
    /^P99 ITL/ {i99 = $NF} /^P50 E2E/ {e50 = $NF}
    /^P99 E2E/ {printf "  %-16s rate %-4s failed %s req/s %s out tok/s %s | TTFT p50 %s p99 %s | TPOT p50 %s p99 %s | ITL p99 %s | E2E p50 %s p99 %s\n", n, r, f, rt, ot, t50, t99, p50, p99, i99, e50, $NF}' \
    "$OUT/bench_$name.txt"
done
