#!/usr/bin/env bash
# `kite serve` on the GPU (issue 6: the scheduler and server unchanged, the model on CUDA):
# run on the GPU machine from the repository root after `bash tools/cuda/build.sh` here
# (carry build-cuda/bundle.tar.xz). Runs the byte-level SSE test (tests/e2e/server/
# sse_curl_test.sh) against build-cuda/kite (--device auto picks the GPU), then its own API
# checks against `kite serve --device cuda` on kite-tiny: greedy chat, n = 2, seeded sampling
# reproduced (GPU sampling), logprobs (sampled on the host), stop strings, a bad request, and
# SIGTERM draining; logs to $OUT/serve_smoke.log.
set -uo pipefail
source tools/cuda/device_env.sh
LOG="$OUT/serve_smoke.log"
echo "== sse_curl_test.sh" | tee "$LOG"
bash tests/e2e/server/sse_curl_test.sh "$PWD/build-cuda/kite" >>"$LOG" 2>&1
echo "sse_curl exit $?" | tee -a "$LOG"

./build-cuda/kite serve --device cuda --port 0 >"$OUT/serve.log" 2>&1 &
pid=$!
url=$(server_url "$OUT/serve.log" "$pid")
[ -n "$url" ] || { echo "server did not start" | tee -a "$LOG"; cat "$OUT/serve.log" >>"$LOG"; exit 1; }
python3 - "$url" >>"$LOG" 2>&1 <<'PY'
import json, sys, urllib.request, urllib.error
url = sys.argv[1]
def post(path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
msgs = [{"role": "user", "content": "What is a kernel?"}]
s, r = post("/v1/chat/completions", {"model": "kite-tiny", "messages": msgs, "max_tokens": 24, "temperature": 0})
assert s == 200 and r["choices"][0]["message"]["content"], r
greedy = r["choices"][0]["message"]["content"]
s, r2 = post("/v1/chat/completions", {"model": "kite-tiny", "messages": msgs, "max_tokens": 24, "temperature": 0})
assert r2["choices"][0]["message"]["content"] == greedy, "greedy not reproducible"
print("ok: greedy chat, reproducible:", repr(greedy[:60]))
s, r = post("/v1/completions", {"model": "kite-tiny", "prompt": "Once upon a time", "max_tokens": 16, "n": 2, "temperature": 1.0, "seed": 7})
assert s == 200 and len(r["choices"]) == 2, r
s, r3 = post("/v1/completions", {"model": "kite-tiny", "prompt": "Once upon a time", "max_tokens": 16, "n": 2, "temperature": 1.0, "seed": 7})
assert [c["text"] for c in r3["choices"]] == [c["text"] for c in r["choices"]], "seeded sampling not reproduced"
print("ok: n=2 seeded sampling reproduced:", [c["text"][:30] for c in r["choices"]])
s, r = post("/v1/completions", {"model": "kite-tiny", "prompt": "The", "max_tokens": 5, "logprobs": 3, "temperature": 0})
assert s == 200 and r["choices"][0]["logprobs"]["top_logprobs"], r
print("ok: logprobs", r["choices"][0]["logprobs"]["token_logprobs"][:3])
s, r = post("/v1/completions", {"model": "kite-tiny", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stop": [" the"]})
assert s == 200 and " the" not in r["choices"][0]["text"], r
print("ok: stop string, finish_reason", r["choices"][0]["finish_reason"])
s, r = post("/v1/chat/completions", {"model": "kite-tiny", "messages": [], "max_tokens": 4})
assert s == 400 and "error" in r, (s, r)
print("ok: bad request ->", s, r["error"]["message"][:60])
PY
echo "api checks exit $?" | tee -a "$LOG"
kill -TERM "$pid"
wait "$pid"
echo "serve exit after SIGTERM: $?" | tee -a "$LOG"
grep -E "cuda|KV cache|GPU memory" "$OUT/serve.log" | head -5 >>"$LOG"
tail -20 "$LOG"
