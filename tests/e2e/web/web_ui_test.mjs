// Browser test of kite's web page: headless Chromium (Debian's /usr/bin/chromium) driven by
// playwright-core. Against the mock server (mock_server.mjs) by default; against the real server
// when KITE_BIN is set (`$KITE_BIN serve --port 0`, shipped model, KITE_MODEL overrides it).
//
//   node tests/e2e/web/web_ui_test.mjs        exit 0 pass, 1 fail, 77 skipped (ctest SKIP)
// Env: KITE_BIN, KITE_MODEL, KITE_CHROMIUM (default /usr/bin/chromium), KITE_SCREENSHOT_DIR
// (default <repo>/build/web_screenshots), KITE_WEB_SKIP_IF_NO_SERVE=1 (skip, not fail, when the
// binary has no `serve` subcommand or no page at / yet).
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const kSkip = 77;
const chromiumPath = process.env.KITE_CHROMIUM || "/usr/bin/chromium";
const kiteBin = process.env.KITE_BIN || "";
const skipIfNoServe = process.env.KITE_WEB_SKIP_IF_NO_SERVE === "1";
const shotDir = process.env.KITE_SCREENSHOT_DIR || path.join(here, "..", "..", "..", "build", "web_screenshots");
const kFlags = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

function skip(why) {
  console.log(`SKIP web_ui: ${why}`);
  process.exit(kSkip);
}

if (!fs.existsSync(chromiumPath)) skip(`${chromiumPath} not found (apt-get install chromium; scripts/setup.sh does)`);
let chromium;
try {
  ({ chromium } = await import("playwright-core"));
} catch {
  skip("playwright-core is not installed (scripts/setup.sh runs npm ci in tests/e2e/web)");
}
if (kiteBin && skipIfNoServe) {
  const help = spawnSync(kiteBin, ["serve", "--help"], { encoding: "utf8" });
  if (!/--port/.test(help.stdout + help.stderr)) skip(`${kiteBin} has no 'serve' subcommand yet`);
}

// ------------------------------------------------------------------ servers
async function startServer(apiKey = "") {
  if (!kiteBin) {
    const { startMock } = await import("./mock_server.mjs");
    const m = await startMock({ apiKey, tokenMs: 30 });
    return { url: m.url, mock: m.state, close: m.close };
  }
  const args = ["serve", "--port", "0"];
  if (process.env.KITE_MODEL) args.push("--model", process.env.KITE_MODEL);
  if (apiKey) args.push("--api-key", apiKey);
  const proc = spawn(kiteBin, args, { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kite serve printed no address in 60 s:\n${log}`)), 60000);
    proc.stderr.on("data", (d) => {
      log += d;
      const m = /listening on (http:\/\/\S+)/.exec(log);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`kite serve exited (${code}):\n${log}`)); });
  });
  const close = () => new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
    proc.once("exit", resolve);
    proc.kill("SIGTERM");
    setTimeout(() => proc.kill("SIGKILL"), 5000).unref();
  });
  const page = await fetch(url + "/").then((r) => r.text()).catch(() => "");
  if (!page.includes('id="cards"')) {
    await close();
    if (skipIfNoServe) skip("kite serve does not serve the web page at / yet");
    throw new Error(`GET ${url}/ did not return the web page`);
  }
  return { url, mock: null, close };
}

// ------------------------------------------------------------------ harness
let failures = 0;
async function step(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
}

const lastReply = (page) => page.evaluate(() => {
  const all = document.querySelectorAll(".msg.assistant");
  const li = all[all.length - 1];
  if (!li) return null;
  const figs = {};
  for (const s of li.querySelectorAll("[data-fig]")) figs[s.dataset.fig] = s.textContent;
  return { text: li.querySelector(".text").textContent, done: !!li.querySelector(".figs"), figs };
});
const userCount = (page) => page.locator(".msg.user").count();
const waitReplyDone = (page, timeout = 60000) => page.waitForFunction(() => {
  const all = document.querySelectorAll(".msg.assistant");
  return all.length && all[all.length - 1].querySelector(".figs");
}, null, { timeout });
const text = (page, sel) => page.locator(sel).textContent();

// kite_generation_tokens_total, read by the test itself (not through the page).
async function generatedTokens(url) {
  const text = await (await fetch(url + "/metrics")).text();
  const m = /^kite_generation_tokens_total(?:\{[^}]*\})? (\S+)/m.exec(text);
  assert.ok(m, "no kite_generation_tokens_total in /metrics");
  return Number(m[1]);
}

// Records the last reply's length at every DOM change, to see it grow chunk by chunk.
const watchGrowth = (page) => page.evaluate(() => {
  window.__lens = [];
  new MutationObserver(() => {
    const all = document.querySelectorAll(".msg.assistant .text");
    if (all.length) window.__lens.push(all[all.length - 1].textContent.length);
  }).observe(document.getElementById("log"), { subtree: true, childList: true, characterData: true });
});

// Chat requests the page sends (parsed JSON bodies) and each request's Authorization header.
function recordRequests(page) {
  const rec = { chats: [], auth: [] };
  page.on("request", (r) => {
    const p = new URL(r.url()).pathname;
    rec.auth.push({ path: p, auth: r.headers().authorization || "" });
    if (p === "/v1/chat/completions") rec.chats.push(r.postDataJSON());
  });
  return rec;
}

async function openPage(browser, url, viewport, prepare = async () => {}, colorScheme = "light") {
  const ctx = await browser.newContext({ viewport, colorScheme });
  await prepare(ctx);
  const page = await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const rec = recordRequests(page);
  await page.goto(url + "/");
  return { ctx, page, errors, rec };
}

// ------------------------------------------------------------------ tests
fs.mkdirSync(shotDir, { recursive: true });
const server = await startServer();
const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: kFlags });
console.log(`web_ui: testing ${kiteBin ? "kite serve" : "mock server"} at ${server.url}; screenshots in ${shotDir}`);

try {
  const desk = await openPage(browser, server.url, { width: 1280, height: 800 });
  const { page, rec } = desk;
  // A small model may end a reply after a token or two (or end a "long" story early);
  // ignore_eos (a vLLM/kite extension the page does not send) makes replies run to max_tokens,
  // so growth and Stop can be seen. The mock ignores it.
  await page.route("**/v1/chat/completions", (route) => route.continue({
    postData: JSON.stringify({ ...route.request().postDataJSON(), ignore_eos: true }) }));
  await page.fill("#max-tokens", "48");

  await step("page loads, engine panel fills from /metrics", async () => {
    await page.waitForFunction(() => document.getElementById("v-running").textContent !== "—",
      null, { timeout: 10000 });
    assert.equal(await text(page, "#v-running"), "0");
    assert.match(await text(page, "#conn"), /connected/);
    await page.waitForFunction(() => document.getElementById("model").textContent !== "", null, { timeout: 5000 });
  });

  await step("accessible basics: labelled inputs, live reply region, Tab reaches Send", async () => {
    const unlabelled = await page.evaluate(() => [...document.querySelectorAll("input,textarea")]
      .filter((e) => !e.labels.length && !e.getAttribute("aria-label")).map((e) => e.id));
    assert.deepEqual(unlabelled, []);
    await page.focus("#prompt");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement.id), "send");
  });

  await step("send: the reply streams in incrementally with figures", async () => {
    await watchGrowth(page);
    // kite-tiny makes 150-350 tokens/s here and chunks can bunch up on a loaded machine: 200
    // tokens give the reply time to be seen growing (the mock's reply is ~20 slow words).
    await page.fill("#max-tokens", "200");
    await page.fill("#prompt", "Hello kite, tell me about streaming");
    await page.click("#send");
    await waitReplyDone(page);
    const r = await lastReply(page);
    const lens = await page.evaluate(() => window.__lens);
    const distinct = [...new Set(lens)];
    assert.ok(r.text.length > 0, "empty reply");
    assert.ok(distinct.length >= 3, `reply did not grow over time: lengths ${distinct}`);
    for (let i = 1; i < distinct.length; i++) assert.ok(distinct[i] > distinct[i - 1], `shrank: ${distinct}`);
    assert.match(r.figs.ttft || "", /^TTFT \d/);
    assert.match(r.figs.prompt || "", /^prompt \d+ tokens$/);
    assert.match(r.figs.cached || "", /^cached prefix \d+$/);
    const body = rec.chats[0];
    assert.equal(body.stream, true);
    assert.equal(body.stream_options.include_usage, true);
    assert.equal(await page.getAttribute(".msg.assistant .text", "aria-live"), "polite");
    await page.fill("#max-tokens", "48");
  });

  await step("keyboard: Shift+Enter adds a line, Enter sends (second turn carries history)", async () => {
    const before = await userCount(page);
    await page.focus("#prompt");
    await page.keyboard.type("first line");
    await page.keyboard.press("Shift+Enter");
    await page.keyboard.type("second line");
    assert.equal(await page.inputValue("#prompt"), "first line\nsecond line");
    assert.equal(await userCount(page), before, "Shift+Enter sent the message");
    await page.keyboard.press("Enter");
    await page.waitForFunction((n) => document.querySelectorAll(".msg.user").length === n + 1, before);
    assert.equal(await page.inputValue("#prompt"), "");
    const users = await page.locator(".msg.user .text").allTextContents();
    assert.equal(users[users.length - 1], "first line\nsecond line");
    await waitReplyDone(page);
    const msgs = rec.chats[rec.chats.length - 1].messages.map((m) => m.role);
    assert.deepEqual(msgs, ["user", "assistant", "user"]);
    if (server.mock) {  // the mock caches whole 4-token blocks of the first turn's prompt
      const r = await lastReply(page);
      assert.ok(Number(r.figs.cached.match(/\d+/)[0]) > 0, `no cached prefix: ${r.figs.cached}`);
    }
  });

  await step("stop: a long reply halts, the server's running count drops to 0", async () => {
    // 1500 keeps prompt + reply under kite-tiny's 2048-token context.
    await page.fill("#system", "You are a storyteller.");
    await page.fill("#max-tokens", "1500");
    const g0 = await generatedTokens(server.url);
    await page.fill("#prompt", "Please write a long story about kites");
    await page.keyboard.press("Enter");
    // kite-tiny may finish 1500 tokens in a few seconds: against it, stop as soon as text shows;
    // the mock's reply takes 45 s, so there the panel is first seen counting it as running.
    // Stop is clicked inside the page, in the same task as the check that the reply is still
    // streaming: a Playwright click is several round trips to a browser that CI's parallel soak
    // test can starve for seconds (it once passed its 3 s timeout after scrolling the button
    // into view), while the reply may end meanwhile.
    await page.waitForFunction((needRunning) => {
      const all = document.querySelectorAll(".msg.assistant .text");
      const stop = document.getElementById("stop");
      if (all[all.length - 1].textContent.length <= 40 || stop.disabled) return false;
      if (needRunning && Number(document.getElementById("v-running").textContent) < 1) return false;
      stop.click();
      return true;
    }, !!server.mock, { timeout: 15000 });
    await waitReplyDone(page, 5000);
    const len = (await lastReply(page)).text.length;
    await page.waitForTimeout(1200);
    const r = await lastReply(page);
    assert.equal(r.text.length, len, "reply kept growing after Stop");
    assert.equal(r.figs.note, "stopped");
    assert.equal(await page.isEnabled("#stop"), false);
    assert.equal(await page.isEnabled("#send"), true);
    await page.waitForFunction(() => document.getElementById("v-running").textContent === "0",
      null, { timeout: 8000 });
    const body = rec.chats[rec.chats.length - 1];
    assert.deepEqual(body.messages[0], { role: "system", content: "You are a storyteller." });
    assert.equal(body.max_tokens, 1500);
    // The server cancelled the request: it stopped well short of max_tokens and makes no more.
    const g1 = await generatedTokens(server.url);
    await page.waitForTimeout(1000);
    assert.equal(await generatedTokens(server.url), g1, "tokens still being generated");
    assert.ok(g1 - g0 < 1500, `the server generated all ${g1 - g0} tokens`);
    if (server.mock) {
      assert.equal(server.mock.aborted, 1, "the server did not see the disconnect");
      assert.equal(server.mock.running.size, 0);
    }
    await page.fill("#max-tokens", "48");
  });

  await step("background load shows in the engine panel; desktop screenshot", async () => {
    // Three requests from outside the chat (the browser allows 6 connections per host: these,
    // the chat stream and the metrics poll fit); the mock runs 2 at once and queues the rest.
    const load = page.evaluate(() => Promise.all([...Array(3)].map((_, i) => fetch("/v1/chat/completions", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "long background " + i }], max_tokens: 80 }),
    }).then((r) => r.json()))));
    await page.fill("#prompt", "What is a prefix cache?");
    await page.keyboard.press("Enter");
    if (server.mock) {
      await page.waitForFunction(() => Number(document.getElementById("v-waiting").textContent) >= 1,
        null, { timeout: 5000 });
    }
    await waitReplyDone(page);
    await page.waitForTimeout(1000);  // one more metrics poll for the charts
    await page.screenshot({ path: path.join(shotDir, "web_desktop.png") });
    assert.equal((await load).length, 3);
    assert.deepEqual(desk.errors, [], "page threw");
    const perSecond = desk.rec.auth.filter((a) => a.path === "/metrics").length;
    assert.ok(perSecond > 0);
  });
  await step("new chat: clears the conversation, the next request has no old turns", async () => {
    await page.click("#new-chat");
    assert.equal(await page.locator(".msg").count(), 0);
    assert.equal(await page.locator("#empty").count(), 1);
    await page.fill("#prompt", "fresh start");
    await page.keyboard.press("Enter");
    await waitReplyDone(page);
    const roles = rec.chats[rec.chats.length - 1].messages.map((m) => m.role);
    assert.deepEqual(roles, ["system", "user"]);
  });
  await desk.ctx.close();

  await step("phone 390x844: panels stack, nothing overflows sideways", async () => {
    const ph = await openPage(browser, server.url, { width: 390, height: 844 });
    await ph.page.waitForFunction(() => document.getElementById("v-running").textContent !== "—");
    await ph.page.fill("#prompt", "Hi from a phone");
    await ph.page.click("#send");
    await waitReplyDone(ph.page);
    await ph.page.waitForTimeout(1200);
    const g = await ph.page.evaluate(() => {
      const box = (id) => document.getElementById(id).getBoundingClientRect();
      return { chat: box("chat"), engine: box("engine"), send: box("send"),
        scrollW: document.documentElement.scrollWidth };
    });
    assert.ok(g.scrollW <= 390, `page is ${g.scrollW}px wide`);
    assert.ok(g.engine.top >= g.chat.bottom - 1, "engine panel is not below the chat panel");
    assert.ok(g.send.right <= 390 && g.send.width > 0, "Send is off screen");
    await ph.page.screenshot({ path: path.join(shotDir, "web_phone.png") });
    await ph.page.screenshot({ path: path.join(shotDir, "web_phone_full.png"), fullPage: true });
    assert.deepEqual(ph.errors, []);
    await ph.ctx.close();
  });
} finally {
  await server.close();
}

await step("api key: 401 asks once, wrong key asks again, key kept in sessionStorage", async () => {
  const key = "kite-test-" + Math.random().toString(36).slice(2);
  const keyed = await startServer(key);
  try {
    const k = await openPage(browser, keyed.url, { width: 1280, height: 800 }, (ctx) =>
      ctx.addInitScript(() => {  // count how often the page asks
        window.__asked = 0;
        const show = HTMLDialogElement.prototype.showModal;
        HTMLDialogElement.prototype.showModal = function () { window.__asked++; return show.call(this); };
      }), "dark");  // this page's screenshots show the dark theme
    const dialogOpen = () => k.page.evaluate(() => document.getElementById("key-dialog").open);
    const asked = () => k.page.evaluate(() => window.__asked);
    await k.page.waitForFunction(() => document.getElementById("key-dialog").open, null, { timeout: 5000 });
    await k.page.waitForTimeout(2500);  // /v1/models and /metrics both got 401s, polls went on
    assert.equal(await asked(), 1, "asked for the key more than once");
    await k.page.screenshot({ path: path.join(shotDir, "web_api_key.png") });
    await k.page.fill("#key-input", "wrong-key");
    await k.page.keyboard.press("Enter");
    await k.page.waitForFunction(() => document.getElementById("key-dialog").open &&
      /rejected/.test(document.getElementById("key-msg").textContent), null, { timeout: 5000 });
    await k.page.fill("#key-input", key);
    const mark = k.rec.auth.length;
    await k.page.click("#key-form button[type=submit]");
    await k.page.waitForFunction(() => document.getElementById("v-running").textContent !== "—",
      null, { timeout: 5000 });
    assert.equal(await dialogOpen(), false);
    assert.equal(await asked(), 2);  // once at load, once after the wrong key
    await k.page.fill("#prompt", "hello with a key");
    await k.page.keyboard.press("Enter");
    await waitReplyDone(k.page);
    const r = await lastReply(k.page);
    assert.ok(r.text.length > 0 && !r.figs.note, `reply failed: ${JSON.stringify(r)}`);
    const store = await k.page.evaluate(() => ({ s: sessionStorage.getItem("kite.apiKey"), l: localStorage.length }));
    assert.deepEqual(store, { s: key, l: 0 });
    // Once the key is in use, every API request carries it, /metrics included (kite serve
    // does not require it there; the mock does).
    await k.page.waitForTimeout(1200);  // at least one more metrics poll
    const first = k.rec.auth.findIndex((a, i) => i >= mark && a.auth === `Bearer ${key}`);
    const after = k.rec.auth.slice(first).filter((a) => a.path !== "/" && a.path !== "/favicon.ico");
    assert.ok(first >= 0 && after.some((a) => a.path === "/metrics"), JSON.stringify(k.rec.auth));
    for (const a of after) assert.equal(a.auth, `Bearer ${key}`, `${a.path} sent "${a.auth}"`);
    // A reload in the same tab keeps the key: no prompt.
    await k.page.reload();
    await k.page.waitForFunction(() => document.getElementById("v-running").textContent !== "—",
      null, { timeout: 5000 });
    assert.equal(await asked(), 0, "asked again after a reload");
    await k.page.screenshot({ path: path.join(shotDir, "web_dark.png") });
    assert.deepEqual(k.errors, []);
    await k.ctx.close();
  } finally {
    await keyed.close();
  }
});

await browser.close();
console.log(failures ? `web_ui: ${failures} step(s) failed` : "web_ui: all steps passed");
process.exit(failures ? 1 : 0);
