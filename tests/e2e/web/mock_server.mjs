// A stand-in for `kite serve` with the same HTTP surface the web page uses, so the page and its
// browser test work without a model: GET / (src/server/web/index.html, re-read per request so
// edits show on reload), GET /health, GET /v1/models, POST /v1/chat/completions (streaming SSE
// and not), GET /metrics (Prometheus text), optional Bearer API key. The "engine" runs at most
// kMaxRunning requests at once and queues the rest, emits one word per token every tokenMs, and
// cancels a request when its client disconnects — so the page's running/waiting counts, stop
// button and figures can be checked against known behaviour.
//
//   node tests/e2e/web/mock_server.mjs [--port 8000] [--api-key KEY] [--token-ms 40]
// or import { startMock } from this file (the browser test does).
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const kDefaultIndex = path.join(here, "..", "..", "..", "src", "server", "web", "index.html");
const kMaxRunning = 2;
const kKvCapacityTokens = 4096;
const kBlock = 4;  // prefix-cache block size in (word) tokens
const kModel = "kite-mock";
const kWords = ("the quick kite rides a steady wind over green hills while small birds " +
  "circle below and the string hums softly in the bright afternoon light").split(" ");
const kTtftBuckets = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5];
const kTpotBuckets = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1];

class Histogram {
  constructor(bounds) { this.bounds = bounds; this.counts = bounds.map(() => 0); this.sum = 0; this.n = 0; }
  observe(v) {
    this.bounds.forEach((b, i) => { if (v <= b) this.counts[i]++; });
    this.sum += v;
    this.n++;
  }
  text(name) {
    const lines = [`# TYPE ${name} histogram`];
    this.bounds.forEach((b, i) => lines.push(`${name}_bucket{le="${b}"} ${this.counts[i]}`));
    lines.push(`${name}_bucket{le="+Inf"} ${this.n}`, `${name}_sum ${this.sum}`, `${name}_count ${this.n}`);
    return lines.join("\n");
  }
}

const tokenize = (messages) =>
  messages.flatMap((m) => [`<${m.role}>`, ...String(m.content ?? "").split(/\s+/).filter(Boolean)]);

export function startMock({ port = 0, host = "127.0.0.1", apiKey = "", tokenMs = 40,
  index = kDefaultIndex } = {}) {
  const st = { running: new Set(), queue: [], promptTokens: 0, genTokens: 0, prefixQueries: 0,
    prefixHits: 0, aborted: 0, completed: 0, prompts: [], ttft: new Histogram(kTtftBuckets),
    tpot: new Histogram(kTpotBuckets) };

  const json = (res, code, obj) => {
    res.writeHead(code, { "Content-Type": "application/json" });
    res.end(JSON.stringify(obj));
  };
  const authorized = (req) => !apiKey || req.headers.authorization === `Bearer ${apiKey}`;

  function metrics() {
    let kvTokens = st.prompts.reduce((a, p) => a + p.length, 0);
    for (const r of st.running) kvTokens += r.prompt.length + r.emitted;
    const g = (name, v, type = "gauge") => `# TYPE ${name} ${type}\n${name}{model_name="${kModel}"} ${v}`;
    return [g("kite_requests_running", st.running.size), g("kite_requests_waiting", st.queue.length),
      g("kite_kv_cache_usage_ratio", Math.min(1, kvTokens / kKvCapacityTokens)),
      g("kite_prefix_cache_queries_total", st.prefixQueries, "counter"),
      g("kite_prefix_cache_hits_total", st.prefixHits, "counter"),
      g("kite_prompt_tokens_total", st.promptTokens, "counter"),
      g("kite_generation_tokens_total", st.genTokens, "counter"),
      st.ttft.text("kite_time_to_first_token_seconds"),
      st.tpot.text("kite_time_per_output_token_seconds")].join("\n") + "\n";
  }

  // Longest cached prefix, in whole blocks; remembers this prompt for later requests.
  function cachedPrefix(prompt) {
    let best = 0;
    for (const p of st.prompts) {
      let i = 0;
      while (i < p.length && i < prompt.length && p[i] === prompt[i]) i++;
      best = Math.max(best, i);
    }
    st.prompts.push(prompt);
    if (st.prompts.length > 32) st.prompts.shift();
    return Math.floor(Math.min(best, prompt.length - 1) / kBlock) * kBlock;
  }

  // "You said: <first words> —" then filler; "long"/"story" asks run until max_tokens.
  function replyWords(body, prompt) {
    const last = [...body.messages].reverse().find((m) => m.role === "user");
    const said = String(last?.content ?? "").split(/\s+/).filter(Boolean).slice(0, 6);
    const natural = /long|story|essay/i.test(last?.content ?? "") ? Infinity : 18 + (prompt.length % 7);
    const n = Math.max(1, Math.min(natural, body.max_tokens ?? 4096));
    const words = ["You", "said:", ...said, "—"];
    for (let i = 0; words.length < n; i++) words.push(kWords[(i * 7 + prompt.length) % kWords.length]);
    return { words: words.slice(0, n), finish: n < natural ? "length" : "stop" };
  }

  function start(r) {
    st.running.add(r);
    let last = Date.now() / 1000;
    const step = () => {
      if (r.done) return;
      const now = Date.now() / 1000;
      if (r.emitted === 0) st.ttft.observe(now - r.arrived);
      else st.tpot.observe(now - last);
      last = now;
      const w = r.plan.words[r.emitted];
      r.emitted++;
      st.genTokens++;
      r.onToken((r.emitted === 1 ? "" : " ") + w);
      if (r.emitted >= r.plan.words.length) return finish(r, false);
      r.timer = setTimeout(step, tokenMs);
    };
    r.timer = setTimeout(step, 60 + r.prompt.length);  // "prefill"
  }
  function finish(r, aborted) {
    if (r.done) return;
    r.done = true;
    clearTimeout(r.timer);
    const wasRunning = st.running.delete(r);
    st.queue = st.queue.filter((q) => q !== r);
    aborted ? st.aborted++ : st.completed++;
    if (!aborted) r.onDone();
    if (wasRunning && st.queue.length) start(st.queue.shift());
  }

  function chat(res, body) {
    if (!Array.isArray(body.messages) || body.messages.length === 0) {
      return json(res, 400, { error: { message: "messages must be a non-empty array", type: "invalid_request_error" } });
    }
    const prompt = tokenize(body.messages);
    const cached = cachedPrefix(prompt);
    st.promptTokens += prompt.length;
    st.prefixQueries += prompt.length;
    st.prefixHits += cached;
    const id = "chatcmpl-mock" + Math.random().toString(36).slice(2, 10);
    const created = Math.floor(Date.now() / 1000);
    const r = { prompt, plan: replyWords(body, prompt), emitted: 0, arrived: Date.now() / 1000, done: false };
    const usage = () => ({ prompt_tokens: prompt.length, completion_tokens: r.emitted,
      total_tokens: prompt.length + r.emitted, prompt_tokens_details: { cached_tokens: cached } });
    const chunk = (delta, finishReason = null) => ({ id, object: "chat.completion.chunk", created,
      model: kModel, choices: [{ index: 0, delta, finish_reason: finishReason }] });
    let text = "";
    if (body.stream) {
      res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
      const send = (o) => res.write(`data: ${JSON.stringify(o)}\n\n`);
      send(chunk({ role: "assistant", content: "" }));
      r.onToken = (t) => send(chunk({ content: t }));
      r.onDone = () => {
        send(chunk({}, r.plan.finish));
        if (body.stream_options?.include_usage) {
          send({ id, object: "chat.completion.chunk", created, model: kModel, choices: [], usage: usage() });
        }
        res.end("data: [DONE]\n\n");
      };
    } else {
      r.onToken = (t) => { text += t; };
      r.onDone = () => json(res, 200, { id, object: "chat.completion", created, model: kModel,
        choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: r.plan.finish }],
        usage: usage() });
    }
    res.on("close", () => finish(r, true));  // no-op when it already finished
    if (st.running.size < kMaxRunning) start(r);
    else st.queue.push(r);
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    if (req.method === "GET" && url.pathname === "/") {
      res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
      return res.end(fs.readFileSync(index));
    }
    if (url.pathname === "/health") return json(res, 200, { status: "ok" });
    if (!authorized(req)) {
      return json(res, 401, { error: { message: "Invalid or missing API key", type: "invalid_request_error" } });
    }
    if (req.method === "GET" && url.pathname === "/metrics") {
      res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4" });
      return res.end(metrics());
    }
    if (req.method === "GET" && url.pathname === "/v1/models") {
      return json(res, 200, { object: "list", data: [{ id: kModel, object: "model", owned_by: "kite" }] });
    }
    if (req.method === "POST" && url.pathname === "/v1/chat/completions") {
      let raw = "";
      req.on("data", (d) => { raw += d; });
      req.on("end", () => {
        let body;
        try { body = JSON.parse(raw); } catch (e) {
          return json(res, 400, { error: { message: "body is not JSON: " + e.message, type: "invalid_request_error" } });
        }
        chat(res, body);
      });
      return;
    }
    json(res, 404, { error: { message: `no route ${req.method} ${url.pathname}`, type: "not_found" } });
  });

  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      const url = `http://${host}:${server.address().port}`;
      resolve({ url, state: st, close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }) });
    });
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const arg = (name, dflt) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : dflt;
  };
  const m = await startMock({ port: Number(arg("--port", 8000)), apiKey: arg("--api-key", ""),
    tokenMs: Number(arg("--token-ms", 40)) });
  process.stderr.write(`mock: listening on ${m.url}\n`);
}
