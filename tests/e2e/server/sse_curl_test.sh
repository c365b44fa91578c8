#!/usr/bin/env bash
# SSE framing at the byte level, as curl sees it: start `kite serve` on a free loopback port,
# stream a chat and a text completion with curl, and check every byte of the event stream:
# only `data: <json>\n\n` events, each JSON parseable, the last event exactly `data: [DONE]\n\n`,
# and (with include_usage) a final chunk that carries usage and no choices.
# Usage: sse_curl_test.sh /path/to/kite
set -euo pipefail
KITE=${1:?usage: sse_curl_test.sh KITE_BINARY}
command -v curl >/dev/null || { echo "curl not installed: skipping"; exit 77; }
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT

"$KITE" serve --port 0 >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.log" | head -1 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "server did not start"; cat "$work/serve.log"; exit 1; }

check_stream() {  # $1: file with the raw body
  python3 - "$1" <<'PY'
import json, sys
raw = open(sys.argv[1], "rb").read()
assert raw.endswith(b"data: [DONE]\n\n"), raw[-40:]
events = raw.split(b"\n\n")
assert events[-1] == b"", "stream must end with a blank line"
events = events[:-1]
assert len(events) >= 3, len(events)
for e in events[:-1]:
    assert e.startswith(b"data: ") and b"\n" not in e, e[:80]
    json.loads(e[6:])
assert events[-1] == b"data: [DONE]"
last = json.loads(events[-2][6:])
assert last["choices"] == [] and last["usage"]["completion_tokens"] == 6, last
print(f"ok: {len(events)} events, {len(raw)} bytes")
PY
}

curl -sS -N -D "$work/h1" -o "$work/chat.raw" "$url/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model":"kite-tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":6,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}'
grep -qi '^content-type: text/event-stream' "$work/h1" || { echo "wrong content type"; cat "$work/h1"; exit 1; }
check_stream "$work/chat.raw"

curl -sS -N -o "$work/text.raw" "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model":"kite-tiny","prompt":"The kernel","max_tokens":6,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}'
check_stream "$work/text.raw"
echo "1 passed, 0 failed"
