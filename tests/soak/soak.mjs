// Soak test of `kite serve` (issue 8): starts the server on the shipped kite-tiny model on a
// loopback port and drives it with many concurrent clients for a bounded time, mixing
// streaming and non-streaming requests, cancellations (disconnects mid-stream and while
// waiting), invalid parameters, oversized prompts and bodies. Ends with a burst of streams and
// SIGTERM under that load. Node built-ins only (no npm packages).
//
//   node tests/soak/soak.mjs --bin build/kite --clients 500 --duration 300 [--json out.json]
//
// Pass criteria (exit 1 otherwise, with the reasons printed):
//  - every valid request completes (200, well-formed JSON or SSE ending in [DONE]) or gets a
//    well-formed OpenAI error (429 when the queue is full); every invalid one gets its 4xx;
//  - after the load, /metrics shows 0 requests running or waiting and KV usage 0;
//  - SIGTERM under load: every stream of the final burst completes, the process exits 0 and
//    logs that the engine's integrity check (block pool + request accounting) passed;
//  - resident memory after warm-up grows by at most --rss-slack-mb (default 64 MiB).
// Figures printed (and written with --json): counts per outcome, latency p50/p90/p99 of
// completed requests, TTFT p50/p99 of streams, RSS samples, preemptions.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';

function parseArgs(argv) {
  const a = {
    bin: 'build/kite', clients: 50, duration: 60, kvCacheMemory: 64, maxNumSeqs: 128,
    maxWaiting: 1024, burst: 32, rssSlackMb: 64, json: '', seed: 1, extra: [],
  };
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (k === 'extra') { a.extra = argv[++i].split(' ').filter(Boolean); continue; }
    if (!(k in a)) throw new Error(`unknown flag ${argv[i]}`);
    a[k] = typeof a[k] === 'number' ? Number(argv[++i]) : argv[++i];
  }
  return a;
}

const args = parseArgs(process.argv);
let rngState = args.seed >>> 0 || 1;
function rand() {  // xorshift32: reproducible mixes for a given --seed
  rngState ^= rngState << 13; rngState >>>= 0;
  rngState ^= rngState >>> 17;
  rngState ^= rngState << 5; rngState >>>= 0;
  return rngState / 4294967296;
}
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function startServer() {
  const serverArgs = ['serve', '--port', '0', '--kv-cache-memory', String(args.kvCacheMemory),
    '--max-num-seqs', String(args.maxNumSeqs), '--max-waiting', String(args.maxWaiting),
    '--max-request-body-bytes', String(1 << 20), ...args.extra];
  const child = spawn(args.bin, serverArgs, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line in 120 s:\n${log}`)),
      120000);
    child.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/kite: listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m && !child.port) {
        child.port = Number(m[1]);
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.on('exit', (code) => { child.exitCode_ = code; if (!child.port) reject(new Error(`exited ${code}:\n${log}`)); });
    child.log = () => log;
  });
}

function rssMb(pid) {
  try {
    const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
    return m ? Number(m[1]) / 1024 : NaN;
  } catch { return NaN; }
}

// One HTTP request. Resolves {status, body, ttft, ms, aborted, error}. abortAfter: 'first'
// (hang up at the first body bytes) or milliseconds.
function request(port, method, path, body, { abortAfter, onFirst } = {}) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const data = body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body));
    const req = http.request({ host: '127.0.0.1', port, method, path, agent: false,
      headers: data === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } });
    let ttft = null;
    let timer = null;
    const finish = (r) => { clearTimeout(timer); resolve({ ms: performance.now() - t0, ttft, ...r }); };
    if (typeof abortAfter === 'number')
      timer = setTimeout(() => { req.destroy(); finish({ aborted: true }); }, abortAfter);
    req.setTimeout(600000, () => { req.destroy(); finish({ error: 'client timeout' }); });
    req.on('response', (res) => {
      const chunks = [];
      res.on('data', (c) => {
        if (ttft === null) { ttft = performance.now() - t0; onFirst?.(); }
        chunks.push(c);
        if (abortAfter === 'first') { req.destroy(); finish({ aborted: true }); }
      });
      res.on('end', () => finish({ status: res.statusCode, body: Buffer.concat(chunks).toString(),
        headers: res.headers }));
      res.on('error', (e) => finish({ error: String(e) }));
    });
    req.on('error', (e) => finish({ error: String(e) }));
    if (data !== undefined) req.write(data);
    req.end();
  });
}

function isErrorShape(body, status) {
  try {
    const e = JSON.parse(body).error;
    return e && typeof e.message === 'string' && e.message.length > 0 && typeof e.type === 'string' &&
      'param' in e && 'code' in e;
  } catch { return false; }
}

function checkSse(body) {
  if (!body.endsWith('\n\n')) return 'SSE body does not end with a blank line';
  const events = body.split('\n\n').filter(Boolean);
  if (events.at(-1) !== 'data: [DONE]') return 'no [DONE]';
  let finished = false;
  for (const ev of events.slice(0, -1)) {
    if (!ev.startsWith('data: ')) return `bad event ${ev.slice(0, 80)}`;
    const j = JSON.parse(ev.slice(6));
    if (j.error) return `error event ${ev.slice(0, 200)}`;
    for (const c of j.choices ?? []) if (c.finish_reason) finished = true;
  }
  return finished ? null : 'no finish_reason';
}

const words = 'the a kernel cache block token model stream server request engine batch'.split(' ');
const text = (n) => Array.from({ length: n }, () => pick(words)).join(' ');
const messages = () => [{ role: 'user', content: text(randInt(2, 40)) }];

// The scenarios, with weights. kind: 'valid' (200 or a well-formed 429), 'cancel' (the
// client hangs up), 'invalid' (the given 4xx), 'probe' (a GET or /tokenize: 200).
const scenarios = [
  [30, 'stream', () => ({ kind: 'valid', stream: true, path: '/v1/completions',
    body: { prompt: text(randInt(1, 60)), max_tokens: randInt(1, 32), stream: true,
      temperature: rand(), seed: randInt(0, 1e6), stream_options: { include_usage: true } } })],
  [12, 'chat_stream', () => ({ kind: 'valid', stream: true, path: '/v1/chat/completions',
    body: { messages: messages(), max_tokens: randInt(1, 32), stream: true, n: randInt(1, 2) } })],
  [8, 'nonstream', () => ({ kind: 'valid', stream: false, path: '/v1/completions',
    body: { prompt: text(randInt(1, 60)), max_tokens: randInt(1, 24), n: randInt(1, 3),
      stop: rand() < 0.3 ? ['kernel'] : undefined, logprobs: rand() < 0.2 ? 2 : undefined } })],
  [7, 'chat_nonstream', () => ({ kind: 'valid', stream: false, path: '/v1/chat/completions',
    body: { messages: messages(), max_tokens: randInt(1, 24), logprobs: rand() < 0.2,
      priority: randInt(-1, 1) } })],
  [10, 'cancel_stream', () => ({ kind: 'cancel', abortAfter: 'first', path: '/v1/completions',
    body: { prompt: text(8), max_tokens: 200, ignore_eos: true, stream: true } })],
  [6, 'cancel_wait', () => ({ kind: 'cancel', abortAfter: randInt(5, 400), path: '/v1/chat/completions',
    body: { messages: messages(), max_tokens: 100, ignore_eos: true } })],
  [10, 'invalid_param', () => pick([
    { kind: 'invalid', status: 400, path: '/v1/completions', body: { prompt: 'x', temperature: -1 } },
    { kind: 'invalid', status: 400, path: '/v1/completions', body: { prompt: 'x', max_tokens: 'many' } },
    { kind: 'invalid', status: 400, path: '/v1/completions', body: { prompt: 'x', n: 1000 } },
    { kind: 'invalid', status: 400, path: '/v1/completions', body: { prompt: 'x', max_tokens: 100000 } },
    { kind: 'invalid', status: 400, path: '/v1/chat/completions', body: { messages: [] } },
    { kind: 'invalid', status: 400, path: '/v1/chat/completions', body: '{"messages": [' },
    { kind: 'invalid', status: 400, path: '/v1/completions', body: { prompt: 'x', stop: Array(40).fill('s') } },
    { kind: 'invalid', status: 404, path: '/v1/completions', body: { prompt: 'x', model: 'gpt-9' } },
  ])],
  [5, 'long_prompt', () => ({ kind: 'invalid', status: 400, path: '/v1/completions',
    body: { prompt: 'word '.repeat(randInt(60000, 180000)) } })],
  [3, 'long_token_prompt', () => ({ kind: 'invalid', status: 400, path: '/v1/completions',
    body: { prompt: Array(2100).fill(7) } })],
  [3, 'huge_body', () => ({ kind: 'invalid', status: 413, path: '/v1/completions',
    body: JSON.stringify({ prompt: 'y'.repeat((1 << 20) + 100) }) })],
  [6, 'other', () => pick([
    { kind: 'probe', status: 200, method: 'GET', path: '/health' },
    { kind: 'probe', status: 200, method: 'GET', path: '/v1/models' },
    { kind: 'probe', status: 200, method: 'POST', path: '/tokenize', body: { prompt: text(20) } },
  ])],
];
const totalWeight = scenarios.reduce((s, x) => s + x[0], 0);
function nextScenario() {
  let r = rand() * totalWeight;
  for (const [w, name, make] of scenarios) { if ((r -= w) < 0) return { name, ...make() }; }
  return { name: scenarios[0][1], ...scenarios[0][2]() };
}

const stats = { counts: {}, failures: [], latencies: [], ttfts: [] };
const count = (k) => { stats.counts[k] = (stats.counts[k] ?? 0) + 1; };
const fail = (s, why) => { count('unexpected'); if (stats.failures.length < 30) stats.failures.push(`${s.name}: ${why}`); };

async function runOne(port, s) {
  const r = await request(port, s.method ?? 'POST', s.path, s.body, { abortAfter: s.abortAfter });
  if (s.kind === 'cancel') {
    if (r.aborted) return count('cancelled');
    if (r.status === 200 || (r.status === 429 && isErrorShape(r.body))) return count('cancel_finished_first');
    return fail(s, `cancel: ${r.status} ${r.error ?? ''} ${String(r.body).slice(0, 200)}`);
  }
  if (r.error) return fail(s, r.error);
  if (s.kind === 'invalid' || s.kind === 'probe') {
    if (r.status !== s.status) return fail(s, `expected ${s.status}, got ${r.status} ${String(r.body).slice(0, 200)}`);
    if (s.status >= 400 && !isErrorShape(r.body)) return fail(s, `bad error body ${r.body.slice(0, 200)}`);
    return count(s.status >= 400 ? `rejected_${s.status}` : 'other_ok');
  }
  if (r.status === 429 && isErrorShape(r.body)) return count('queue_full_429');
  if (r.status !== 200) return fail(s, `status ${r.status} ${String(r.body).slice(0, 200)}`);
  if (s.stream) {
    const why = checkSse(r.body);
    if (why) return fail(s, why);
    stats.ttfts.push(r.ttft);
  } else {
    let j;
    try { j = JSON.parse(r.body); } catch { return fail(s, 'body is not JSON'); }
    if (!j.choices?.length || !j.choices.every((c) => c.finish_reason)) return fail(s, `bad body ${r.body.slice(0, 200)}`);
  }
  stats.latencies.push(r.ms);
  count('completed');
}

const quantile = (xs, q) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

function metric(text, name) {
  const m = text.match(new RegExp(`^${name.replace(/[{}"=]/g, (c) => '\\' + c)} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

async function waitIdle(port, timeoutMs) {
  const deadline = performance.now() + timeoutMs;
  let m = '';
  while (performance.now() < deadline) {
    m = (await request(port, 'GET', '/metrics')).body ?? '';
    if (metric(m, 'kite_kv_cache_usage_ratio') === 0 && metric(m, 'kite_requests_running') === 0 &&
        metric(m, 'kite_requests_waiting') === 0) return { idle: true, metrics: m };
    await sleep(100);
  }
  return { idle: false, metrics: m };
}

async function main() {
  const server = await startServer();
  const port = server.port;
  const pid = server.pid;
  console.log(`soak: kite serve pid ${pid} on 127.0.0.1:${port}; ${args.clients} clients for ${args.duration} s`);
  const rss = [];
  const t0 = performance.now();
  const sampler = setInterval(() => rss.push([Math.round((performance.now() - t0) / 1000), rssMb(pid)]), 5000);
  rss.push([0, rssMb(pid)]);
  const deadline = t0 + args.duration * 1000;
  const clients = Array.from({ length: args.clients }, async () => {
    while (performance.now() < deadline) await runOne(port, nextScenario());
  });
  await Promise.all(clients);
  const loadSeconds = (performance.now() - t0) / 1000;
  const { idle, metrics } = await waitIdle(port, 30000);
  rss.push([Math.round((performance.now() - t0) / 1000), rssMb(pid)]);
  clearInterval(sampler);
  const problems = stats.failures.slice();
  if (!idle) problems.push(`engine not idle 30 s after the load: running ${metric(metrics, 'kite_requests_running')}, waiting ${metric(metrics, 'kite_requests_waiting')}, kv usage ${metric(metrics, 'kite_kv_cache_usage_ratio')}`);

  // SIGTERM under load: a burst of streams, the signal once they all run, then every one
  // must still complete and the process exit 0.
  let started = 0;
  const burst = Array.from({ length: args.burst }, (_, i) => request(port, 'POST', '/v1/completions',
    { prompt: `Burst ${i}`, max_tokens: 48, ignore_eos: true, stream: true },
    { onFirst: () => ++started }));
  for (let waited = 0; started < args.burst && waited < 60000; waited += 20) await sleep(20);
  const exited = new Promise((r) => server.on('exit', (code, sig) => r({ code, sig })));
  server.kill('SIGTERM');
  const burstResults = await Promise.all(burst);
  const burstOk = burstResults.filter((r) => r.status === 200 && !checkSse(r.body)).length;
  const exit = await Promise.race([exited, sleep(120000).then(() => ({ code: 'timeout' }))]);
  if (burstOk !== args.burst) problems.push(`SIGTERM burst: ${burstOk} of ${args.burst} streams completed`);
  if (exit.code !== 0) problems.push(`exit after SIGTERM: ${exit.code} ${exit.sig ?? ''}`);
  const integrity = /engine integrity check passed at exit[^\n]*/.exec(server.log());
  if (!integrity) problems.push('no "engine integrity check passed" line in the log');

  // Resident memory: the first third of the run is warm-up (allocator pools, KV pages touched).
  const warm = rss.filter(([t]) => t >= args.duration / 3).map(([, m]) => m).filter(Number.isFinite);
  const rssGrowth = warm.length ? Math.max(...warm) - warm[0] : 0;
  if (rssGrowth > args.rssSlackMb) problems.push(`RSS grew ${rssGrowth.toFixed(1)} MiB after warm-up (limit ${args.rssSlackMb})`);

  const summary = {
    clients: args.clients, duration_s: args.duration, load_seconds: Number(loadSeconds.toFixed(1)),
    counts: stats.counts,
    latency_ms: { p50: quantile(stats.latencies, 0.5), p90: quantile(stats.latencies, 0.9), p99: quantile(stats.latencies, 0.99), max: quantile(stats.latencies, 1) },
    ttft_ms: { p50: quantile(stats.ttfts, 0.5), p99: quantile(stats.ttfts, 0.99) },
    preemptions: metric(metrics, 'kite_num_preemptions_total'),
    kv_cache_usage_after: metric(metrics, 'kite_kv_cache_usage_ratio'),
    rss_mb: rss.map(([t, m]) => `${t}s:${m.toFixed(1)}`).join(' '),
    rss_growth_after_warmup_mb: Number(rssGrowth.toFixed(1)),
    sigterm_burst: `${burstOk}/${args.burst} streams completed, exit ${exit.code}`,
    integrity: integrity ? integrity[0] : null,
    problems,
  };
  for (const k of ['latency_ms', 'ttft_ms']) for (const q in summary[k]) summary[k][q] = Math.round(summary[k][q]);
  console.log(JSON.stringify(summary, null, 1));
  if (args.json) fs.writeFileSync(args.json, JSON.stringify(summary, null, 1) + '\n');
  if (problems.length) {
    console.error(`soak: FAILED\n  ${problems.join('\n  ')}\n--- server log tail ---\n${server.log().slice(-3000)}`);
    process.exit(1);
  }
  console.log('soak: passed');
}

main().catch((e) => { console.error(e); process.exit(1); });
