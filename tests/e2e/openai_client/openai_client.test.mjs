// `kite serve` driven by the official OpenAI Node client (pinned in package.json): chat and
// completions, streaming and not, usage, logprobs, stop strings, seed reproducibility, and
// every error status the client can see (400, 401, 404, 413, 429).
//
// Runs one server on a free loopback port for the whole file. The server binary comes from
// $KITE_BIN (ctest sets it) or ../../../build/kite. Skips when node_modules or the binary is
// missing: `npm ci` here (scripts/setup.sh does it) and build first.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = process.env.KITE_BIN || path.join(here, '../../../build/kite');
const KEY = 'node-test-key';
const MODEL = 'kite-tiny';

let openai = null;
try {
  openai = await import('openai');
} catch {
  openai = null;
}
const skip = !openai
  ? 'the openai package is not installed: run `npm ci` in tests/e2e/openai_client'
  : !existsSync(bin)
    ? `the kite binary is not built (${bin})`
    : false;

let server = null;
let baseURL = '';
let client = null;

// A tiny admission bound (2 running + 1 queued) so that a burst of requests sees 429s.
async function startServer() {
  const args = ['serve', '--port', '0', '--api-key', KEY, '--kv-cache-memory', '32', '--max-num-seqs', '2',
                '--max-waiting', '1', '--max-request-body-bytes', '65536'];
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line in 60 s:\n${log}`)), 60000);
    proc.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/kite: listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on('exit', (code) => reject(new Error(`kite serve exited (${code}):\n${log}`)));
  });
  return { proc, port };
}

before(async () => {
  if (skip) return;
  const s = await startServer();
  server = s.proc;
  baseURL = `http://127.0.0.1:${s.port}/v1`;
  client = new openai.OpenAI({ apiKey: KEY, baseURL, maxRetries: 0, timeout: 60000 });
});

after(async () => {
  if (!server) return;
  const exited = new Promise((resolve) => server.on('exit', resolve));
  server.kill('SIGTERM');
  await exited;
});

const chatMessages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hello' }];

test('models.list names the served model', { skip }, async () => {
  const page = await client.models.list();
  assert.deepEqual(page.data.map((m) => m.id), [MODEL]);
});

test('chat: non-streaming and streaming give the same greedy text and usage', { skip }, async () => {
  const params = { model: MODEL, messages: chatMessages, max_tokens: 8, temperature: 0, ignore_eos: true };
  const whole = await client.chat.completions.create(params);
  assert.equal(whole.object, 'chat.completion');
  assert.match(whole.id, /^chatcmpl-/);
  assert.equal(whole.model, MODEL);
  assert.equal(whole.choices.length, 1);
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.equal(whole.choices[0].finish_reason, 'length');
  assert.equal(whole.usage.completion_tokens, 8);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 8);
  assert.equal(typeof whole.usage.prompt_tokens_details.cached_tokens, 'number');

  const stream = await client.chat.completions.create({ ...params, stream: true,
                                                         stream_options: { include_usage: true } });
  let text = '';
  let usage = null;
  let finish = null;
  let role = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      role = role ?? c.delta.role;
      text += c.delta.content ?? '';
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.deepEqual(usage, whole.usage);
});

test('completions: non-streaming and streaming, usage', { skip }, async () => {
  const params = { model: MODEL, prompt: 'The kernel', max_tokens: 10, temperature: 0, ignore_eos: true };
  const whole = await client.completions.create(params);
  assert.equal(whole.object, 'text_completion');
  assert.match(whole.id, /^cmpl-/);
  assert.equal(whole.usage.completion_tokens, 10);
  const stream = await client.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) text += c.text;
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(usage.completion_tokens, 10);
  assert.equal(usage.prompt_tokens, whole.usage.prompt_tokens);
});

test('logprobs: chat content entries and completions arrays', { skip }, async () => {
  const chat = await client.chat.completions.create({ model: MODEL, messages: chatMessages, max_tokens: 4,
                                                      temperature: 0, logprobs: true, top_logprobs: 2 });
  const content = chat.choices[0].logprobs.content;
  assert.equal(content.length, chat.usage.completion_tokens);
  for (const t of content) {
    assert.equal(typeof t.token, 'string');
    assert.ok(t.logprob <= 0);
    assert.ok(Array.isArray(t.bytes));
    assert.equal(t.top_logprobs.length, 2);
    assert.equal(t.top_logprobs[0].token, t.token);  // greedy picks the most likely token
  }
  const comp = await client.completions.create({ model: MODEL, prompt: 'Hello', max_tokens: 4, logprobs: 1,
                                                 ignore_eos: true, seed: 5 });
  const lp = comp.choices[0].logprobs;
  assert.equal(lp.tokens.length, 4);
  assert.equal(lp.token_logprobs.length, 4);
  assert.equal(lp.top_logprobs.length, 4);
  assert.deepEqual(lp.text_offset.slice(0, 1), [0]);
  lp.tokens.forEach((tok, i) => assert.equal(lp.top_logprobs[i][tok], lp.token_logprobs[i]));
});

test('stop strings cut the text before the match', { skip }, async () => {
  const params = { model: MODEL, prompt: 'Once upon a time', max_tokens: 24, temperature: 0, ignore_eos: true };
  const full = (await client.completions.create(params)).choices[0].text;
  assert.ok(full.length >= 12, full);
  const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 3);
  const cut = await client.completions.create({ ...params, stop: [stop] });
  assert.equal(cut.choices[0].text, full.slice(0, full.indexOf(stop)));
  assert.equal(cut.choices[0].finish_reason, 'stop');
});

test('the same seed gives the same sample', { skip }, async () => {
  const params = { model: MODEL, messages: chatMessages, max_tokens: 12, temperature: 1.0, seed: 777,
                   ignore_eos: true };
  const a = await client.chat.completions.create(params);
  const b = await client.chat.completions.create(params);
  const c = await client.chat.completions.create({ ...params, seed: 778 });
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.notEqual(a.choices[0].message.content, c.choices[0].message.content);
});

test('400: a bad parameter names itself', { skip }, async () => {
  await assert.rejects(
    client.chat.completions.create({ model: MODEL, messages: chatMessages, temperature: -1 }),
    (e) => e instanceof openai.BadRequestError && e.status === 400 && e.param === 'temperature');
  await assert.rejects(
    client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 'many' }),
    (e) => e instanceof openai.BadRequestError && e.param === 'max_tokens');
  const tooLong = Array.from({ length: 2100 }, (_, i) => 5 + (i % 100));
  await assert.rejects(client.completions.create({ model: MODEL, prompt: tooLong }),
                       (e) => e.status === 400 && /maximum context length/.test(e.message));
});

test('401: missing or wrong API key', { skip }, async () => {
  const wrong = new openai.OpenAI({ apiKey: 'nope', baseURL, maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (e) => e instanceof openai.AuthenticationError && e.status === 401);
  await assert.rejects(wrong.chat.completions.create({ model: MODEL, messages: chatMessages }),
                       (e) => e instanceof openai.AuthenticationError);
});

test('404: unknown model', { skip }, async () => {
  await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages: chatMessages }),
                       (e) => e instanceof openai.NotFoundError && e.status === 404 && e.code === 'model_not_found');
});

test('413: request body over --max-request-body-bytes', { skip }, async () => {
  await assert.rejects(client.completions.create({ model: MODEL, prompt: 'x'.repeat(70000) }),
                       (e) => e instanceof openai.APIError && e.status === 413);
});

test('429: a burst beyond --max-num-seqs + --max-waiting', { skip }, async () => {
  const burst = Array.from({ length: 8 }, (_, i) =>
    client.completions.create({ model: MODEL, prompt: `burst ${i}`, max_tokens: 64, ignore_eos: true }));
  const results = await Promise.allSettled(burst);
  const limited = results.filter((r) => r.status === 'rejected' && r.reason instanceof openai.RateLimitError);
  const served = results.filter((r) => r.status === 'fulfilled');
  assert.ok(limited.length >= 1, `expected some 429s: ${JSON.stringify(results.map((r) => r.status))}`);
  assert.ok(served.length >= 1);
  const other = results.filter((r) => r.status === 'rejected' && !(r.reason instanceof openai.RateLimitError));
  assert.equal(other.length, 0, other.map((r) => String(r.reason)).join("; "));
  for (const r of limited) assert.equal(r.reason.status, 429);
});
