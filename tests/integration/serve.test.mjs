// `daisy serve` through the official `openai` npm client, with real processes on loopback:
// completions and chat, streamed and not, several clients at once (each must get exactly the
// text it gets alone: batch invariance through the whole server), on the whole model and on a
// 2-stage pipeline; stop strings; bad requests answered with OpenAI-style errors while the
// server stays up; a full queue (429); a client that disconnects mid-stream (its sequence is
// freed). Runs the binary named by $DAISY.
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import {before, test} from "node:test";
import OpenAI from "openai";
import {tokenizerJson} from "../parity/lib.mjs";
import {harness} from "./lib.mjs";

const {dir, mustJson: must, start} = harness("serve");

const model = path.join(dir, "model.gguf");
const keyFile = path.join(dir, "api.key");
const KEY = "sk-daisy-test-0123456789";
let whole, pipe, worker;
const clientFor = (server, opts = {}) =>
  new OpenAI({baseURL: `http://127.0.0.1:${server.ready.port}/v1`, apiKey: KEY, maxRetries: 0, ...opts});

before(async () => {
  must(["gen-model", "--shape", "tiny", "--layers", "4", "--type", "q8_0", "--seed", "21",
        "--tokenizer", tokenizerJson("llama3"), "-o", model, "--json"]);
  fs.writeFileSync(keyFile, KEY + "\n");
  must(["compile", "-m", model, "--stages", "2", "-o", path.join(dir, "s2"), "--json"]);
  whole = await start(["serve", "-m", model, "--http", "127.0.0.1:0", "-t", "1", "--api-key-file", keyFile,
                       "--ctx", "512", "--max-seqs", "4", "--prefill-chunk", "8"]);
  worker = await start(["worker", "--shard", path.join(dir, "s2", "stage-1.daisy"), "--listen", "127.0.0.1:0", "-t", "1"]);
  pipe = await start(["serve", "--shard", path.join(dir, "s2", "stage-0.daisy"), "--workers",
                      `127.0.0.1:${worker.ready.port}`, "--http", "127.0.0.1:0", "-t", "1",
                      "--api-key-file", keyFile, "--ctx", "512", "--max-seqs", "4", "--prefill-chunk", "8"]);
});

// What `daisy run` gives for the same prompt alone (the server's sampling defaults: no top-k,
// top-p or min-p cut unless asked).
function alone(prompt, n, {temp = 0, seed = 0} = {}) {
  return must(["run", "-m", model, "-p", prompt, "-n", String(n), "--temp", String(temp), "--seed", String(seed),
               "--top-k", "0", "--top-p", "1", "--min-p", "0", "-t", "1", "--json"]);
}

const PROMPTS = [
  "The quick brown fox",
  "Once upon a time, in a land far away, there lived",
  "1, 2, 3, 4,",
  "Pipelines split models by layers so that",
  "Hello",
  "A very long prompt about many things: " + "data and models and networks and ".repeat(6),
];

test("completions match a run alone, streamed and not", async () => {
  const client = clientFor(whole);
  const want = alone(PROMPTS[0], 12);
  const r = await client.completions.create({model: whole.ready.model, prompt: PROMPTS[0], max_tokens: 12, temperature: 0});
  assert.equal(r.choices[0].text, want.text);
  assert.equal(r.choices[0].finish_reason, "length");
  assert.deepEqual(r.usage, {prompt_tokens: want.prompt_tokens, completion_tokens: 12, total_tokens: want.prompt_tokens + 12});
  const stream = await client.completions.create({model: whole.ready.model, prompt: PROMPTS[0], max_tokens: 12,
                                                  temperature: 0, stream: true});
  let text = "", finish = null;
  for await (const c of stream) {
    text += c.choices[0].text;
    finish = c.choices[0].finish_reason ?? finish;
  }
  assert.equal(text, want.text);
  assert.equal(finish, "length");
});

test("chat renders the Llama 3 template and streams the same text", async () => {
  const client = clientFor(whole);
  const messages = [{role: "system", content: "You are terse."}, {role: "user", content: "  Name three colours. "}];
  const rendered = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>" +
                   "<|start_header_id|>user<|end_header_id|>\n\nName three colours.<|eot_id|>" +
                   "<|start_header_id|>assistant<|end_header_id|>\n\n";
  // daisy run adds BOS itself; the rendered text carries it once, as the template does.
  const want = alone(rendered.slice("<|begin_of_text|>".length), 10);
  const r = await client.chat.completions.create({model: whole.ready.model, messages, max_tokens: 10, temperature: 0});
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(r.choices[0].message.content, want.text);
  assert.equal(r.usage.prompt_tokens, want.prompt_tokens);
  const stream = await client.chat.completions.create({model: whole.ready.model, messages, max_tokens: 10,
                                                       temperature: 0, stream: true, stream_options: {include_usage: true}});
  let text = "", finish = null, usage = null;
  for await (const c of stream) {
    if (c.usage) usage = c.usage;
    if (c.choices.length) {
      text += c.choices[0].delta.content ?? "";
      finish = c.choices[0].finish_reason ?? finish;
    }
  }
  assert.equal(text, want.text);
  assert.equal(finish, "length");
  assert.equal(usage.completion_tokens, 10);
});

test("stream_options.continuous_usage_stats puts the token count on every chunk", async () => {
  const client = clientFor(whole);
  const want = alone(PROMPTS[1], 12);
  const stream = await client.completions.create({model: whole.ready.model, prompt: PROMPTS[1], max_tokens: 12,
                                                  temperature: 0, stream: true,
                                                  stream_options: {include_usage: true, continuous_usage_stats: true}});
  let text = "", counts = [];
  for await (const c of stream) {
    assert.ok(c.usage, "usage on every chunk");
    assert.equal(c.usage.prompt_tokens, want.prompt_tokens);
    counts.push(c.usage.completion_tokens);
    if (c.choices.length) text += c.choices[0].text;
  }
  assert.equal(text, want.text);
  assert.equal(counts[counts.length - 1], 12);
  for (let i = 1; i < counts.length; i++) assert.ok(counts[i] >= counts[i - 1], `counts never fall: ${counts}`);
  const bad = await fetch(`http://127.0.0.1:${whole.ready.port}/v1/completions`, {
    method: "POST", headers: {"Content-Type": "application/json", Authorization: `Bearer ${KEY}`},
    body: JSON.stringify({model: whole.ready.model, prompt: "x", stream: true, stream_options: {continuous_usage_stats: 1}}),
  });
  assert.equal(bad.status, 400);
  assert.match((await bad.json()).error.message, /'stream_options.continuous_usage_stats' must be a boolean/);
});

async function concurrentMatchesAlone(server) {
  const client = clientFor(server);
  const jobs = PROMPTS.map((p, i) => ({prompt: p, n: 6 + 3 * i, temp: i % 2 ? 0.8 : 0, seed: 1000 + i, stream: i % 3 === 0}));
  const want = jobs.map((j) => alone(j.prompt, j.n, {temp: j.temp, seed: j.seed}).text);
  const got = await Promise.all(jobs.map(async (j) => {
    const req = {model: server.ready.model, prompt: j.prompt, max_tokens: j.n, temperature: j.temp, seed: j.seed};
    if (!j.stream) return (await client.completions.create(req)).choices[0].text;
    let text = "";
    for await (const c of await client.completions.create({...req, stream: true})) text += c.choices[0].text;
    return text;
  }));
  assert.deepEqual(got, want);
}

test("several clients at once each get exactly their text alone (whole model)", async () => {
  await concurrentMatchesAlone(whole);
});

test("several clients at once each get exactly their text alone (2-stage pipeline)", async () => {
  assert.equal(pipe.ready.stages, 2);
  assert.equal(pipe.ready.micro_batches, 2);
  await concurrentMatchesAlone(pipe);
});

test("stop strings end the text before the stop, streamed and not", async () => {
  const client = clientFor(whole);
  const full = alone(PROMPTS[1], 20).text;
  const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 3);
  const cut = full.slice(0, full.indexOf(stop));
  const stops = await metric(whole, 'daisy_requests_total{outcome="stop"}');
  const cancels = await metric(whole, 'daisy_requests_total{outcome="cancelled"}');
  const r = await client.completions.create({model: whole.ready.model, prompt: PROMPTS[1], max_tokens: 20, temperature: 0, stop: [stop]});
  assert.equal(r.choices[0].text, cut);
  assert.equal(r.choices[0].finish_reason, "stop");
  let text = "";
  for await (const c of await client.completions.create({model: whole.ready.model, prompt: PROMPTS[1], max_tokens: 20,
                                                         temperature: 0, stop, stream: true})) text += c.choices[0].text;
  assert.equal(text, cut);
  // Both end as "stop" in /metrics, not "cancelled" (the streamed one may be counted just after
  // its last chunk).
  for (let i = 0; i < 50 && await metric(whole, 'daisy_requests_total{outcome="stop"}') < stops + 2; i++) {
    await new Promise((ok) => setTimeout(ok, 100));
  }
  assert.equal(await metric(whole, 'daisy_requests_total{outcome="stop"}'), stops + 2);
  assert.equal(await metric(whole, 'daisy_requests_total{outcome="cancelled"}'), cancels);
});

test("bad requests get OpenAI-style 4xx errors and the server stays up", async () => {
  const client = clientFor(whole);
  const base = `http://127.0.0.1:${whole.ready.port}`;
  await assert.rejects(clientFor(whole, {apiKey: "wrong"}).models.list(), (e) => e.status === 401 && e.code === "invalid_api_key");
  await assert.rejects(client.completions.create({model: "gpt-4", prompt: "x"}),
                       (e) => e.status === 404 && e.code === "model_not_found" && /does not exist/.test(e.message));
  await assert.rejects(client.completions.create({model: whole.ready.model, prompt: "x", temperature: 7}),
                       (e) => e.status === 400 && e.param === "temperature" && /between 0 and 2/.test(e.message));
  await assert.rejects(client.completions.create({model: whole.ready.model, prompt: "x", max_tokens: 5000}),
                       (e) => e.status === 400 && e.code === "context_length_exceeded");
  await assert.rejects(client.completions.create({model: whole.ready.model, prompt: "word ".repeat(600)}),
                       (e) => e.status === 400 && e.code === "context_length_exceeded" && /context is 512 tokens/.test(e.message));
  await assert.rejects(client.chat.completions.create({model: whole.ready.model, messages: [{role: "wizard", content: "x"}]}),
                       (e) => e.status === 400 && e.param === "messages[0].role");
  await assert.rejects(client.completions.create({model: whole.ready.model, prompt: 42}),
                       (e) => e.status === 400 && e.param === "prompt");
  const auth = {"Authorization": `Bearer ${KEY}`, "Content-Type": "application/json"};
  for (const body of ["{not json", "[1,2]", '{"prompt": "x", "max_tokens": "many"}', '{"prompt": "x", "stream": "yes"}',
                      '{"prompt": "x", "stop": ["a","b","c","d","e"]}', '{"prompt": "x", "n": 30}']) {
    const r = await fetch(`${base}/v1/completions`, {method: "POST", headers: auth, body});
    assert.equal(r.status, 400, body);
    const j = await r.json();
    assert.equal(j.error.type, "invalid_request_error", body);
    assert.ok(j.error.message.length > 0);
  }
  const notFound = await metric(whole, 'daisy_http_errors_total{status="404"}');
  const missing = await fetch(`${base}/v1/engines`, {headers: auth});
  assert.equal(missing.status, 404);
  assert.equal(await metric(whole, 'daisy_http_errors_total{status="404"}'), notFound + 1);
  const wrongMethod = await fetch(`${base}/v1/completions`, {headers: auth});
  assert.equal(wrongMethod.status, 405);
  assert.equal(wrongMethod.headers.get("allow"), "POST");
  assert.equal((await wrongMethod.json()).error.code, "method_not_allowed");
  // Still serving.
  const ok = await client.completions.create({model: whole.ready.model, prompt: "Hello", max_tokens: 3, temperature: 0});
  assert.equal(ok.choices[0].text, alone("Hello", 3).text);
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [whole.ready.model]);
  const health = await (await fetch(`${base}/health`)).json();
  assert.equal(health.status, "ok");
});

// A metric's value, or null when /metrics does not have it (yet).
async function maybeMetric(server, name) {
  const text = await (await fetch(`http://127.0.0.1:${server.ready.port}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(name + " "));
  return line ? Number(line.split(" ").pop()) : null;
}

async function metric(server, name) {
  const text = await (await fetch(`http://127.0.0.1:${server.ready.port}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(name + " ") || l.startsWith(name + "{"));
  assert.ok(line, `${name} in /metrics`);
  return Number(line.split(" ").pop());
}

test("a client that disconnects mid-stream frees its sequence on every stage", async () => {
  // A 2-stage pipeline with 10 ms added on the hop to the worker, so 400 tokens take seconds and
  // the abort surely lands mid-stream.
  // Its own worker: sharing `pipe`'s would end pipe's session (a worker serves one coordinator).
  const ownWorker = await start(["worker", "--shard", path.join(dir, "s2", "stage-1.daisy"), "--listen", "127.0.0.1:0", "-t", "1"]);
  const proxy = await start(["proxy", "--listen", "127.0.0.1:0", "--to", `127.0.0.1:${ownWorker.ready.port}`,
                             "--delay", "10"]);
  const slow = await start(["serve", "--shard", path.join(dir, "s2", "stage-0.daisy"), "--workers",
                            `127.0.0.1:${proxy.ready.port}`, "--http", "127.0.0.1:0", "-t", "1",
                            "--api-key-file", keyFile, "--ctx", "512", "--max-seqs", "4"]);
  const client = clientFor(slow);
  const before = await metric(slow, 'daisy_requests_total{outcome="cancelled"}');
  const controller = new AbortController();
  const stream = await client.completions.create({model: slow.ready.model, prompt: PROMPTS[2], max_tokens: 400,
                                                  temperature: 0, stream: true}, {signal: controller.signal});
  let chunks = 0, finished = false;
  try {
    for await (const c of stream) {
      if (c.choices[0]?.finish_reason) finished = true;
      if (++chunks === 3) controller.abort();
    }
  } catch (e) {
    assert.equal(e.name, "AbortError", String(e));  // the client's own abort, nothing else
  }
  assert.equal(finished, false, "the stream was cut before its end");
  let active = 1;
  for (let i = 0; i < 100 && active > 0; i++) {
    await new Promise((r) => setTimeout(r, 50));
    active = await metric(slow, "daisy_active_sequences");
  }
  assert.equal(active, 0);
  // The worker let go of it too (its pongs say so within a few heartbeats).
  let workerHeld = -1;
  for (let i = 0; i < 40 && workerHeld !== 0; i++) {
    workerHeld = await maybeMetric(slow, 'daisy_stage_sequences{stage="1"}');
    if (workerHeld !== 0) await new Promise((r) => setTimeout(r, 250));
  }
  assert.equal(workerHeld, 0);
  assert.equal(await metric(slow, 'daisy_requests_total{outcome="cancelled"}'), before + 1);
  assert.equal(await metric(slow, 'daisy_requests_total{outcome="length"}'), 0);
  // A client that gives up on a non-streamed request frees it too, long before its 400 tokens.
  const gaveUp = new AbortController();
  const t0 = Date.now();
  const pending = client.completions.create({model: slow.ready.model, prompt: PROMPTS[1], max_tokens: 400, temperature: 0},
                                            {signal: gaveUp.signal}).then(() => "answered", (e) => (/Abort/.test(`${e.name} ${e.constructor.name}`) ? "aborted" : String(e)));
  await new Promise((r) => setTimeout(r, 500));
  gaveUp.abort();
  assert.equal(await pending, "aborted");
  let cancelled = before + 1;
  for (let i = 0; i < 60 && cancelled === before + 1; i++) {
    await new Promise((r) => setTimeout(r, 50));
    cancelled = await metric(slow, 'daisy_requests_total{outcome="cancelled"}');
  }
  assert.equal(cancelled, before + 2, "the abandoned request was cancelled");
  assert.ok(Date.now() - t0 < 4000, `cancelled after ${Date.now() - t0} ms`);
  assert.equal(await metric(slow, "daisy_active_sequences"), 0);
  // The pipeline serves the next request normally.
  const r = await client.completions.create({model: slow.ready.model, prompt: "Hello", max_tokens: 4, temperature: 0});
  assert.equal(r.choices[0].text, alone("Hello", 4).text);
  slow.proc.kill("SIGTERM");
  proxy.proc.kill("SIGTERM");
  ownWorker.proc.kill("SIGTERM");
});

test("a full queue answers 429 and the others finish", async () => {
  const busy = await start(["serve", "-m", model, "--http", "127.0.0.1:0", "-t", "1", "--ctx", "512",
                            "--max-seqs", "1", "--queue", "1"]);
  const client = new OpenAI({baseURL: `http://127.0.0.1:${busy.ready.port}/v1`, apiKey: "none", maxRetries: 0});
  const results = await Promise.allSettled(Array.from({length: 5}, () =>
      client.completions.create({model: busy.ready.model, prompt: PROMPTS[3], max_tokens: 400, temperature: 0})));
  const refused = results.filter((r) => r.status === "rejected");
  const served = results.filter((r) => r.status === "fulfilled");
  assert.ok(refused.length >= 1, "some request is refused");
  assert.ok(served.length >= 1, "the admitted requests finish");
  for (const r of refused) {
    assert.equal(r.reason.status, 429);
    assert.match(r.reason.message, /the server is busy/);
  }
  const want = alone(PROMPTS[3], 400).text;
  for (const r of served) assert.equal(r.value.choices[0].text, want);
  assert.equal(await metric(busy, 'daisy_requests_total{outcome="rejected_busy"}'), refused.length);
  busy.proc.kill("SIGTERM");
});

// Issue #23: with one thread per connection, 100 clients that sent half a request made the server
// unresponsive until its 30 s read timeout. Idle, slow and half-closed connections now hold no
// thread: with a thousand of them open, a real request is answered as fast as alone.
test("a thousand idle, slow and half-closed connections do not delay a real request; slow ones get 408", async () => {
  const srv = await start(["serve", "-m", model, "--http", "127.0.0.1:0", "-t", "1", "--ctx", "256",
                           "--max-seqs", "2", "--http-timeout", "3"]);
  const port = srv.ready.port;
  const client = new OpenAI({baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none", maxRetries: 0});
  const ask = async () => {
    const t0 = performance.now();
    const r = await client.completions.create({model: srv.ready.model, prompt: "Hello", max_tokens: 1, temperature: 0});
    return {ms: performance.now() - t0, text: r.choices[0].text};
  };
  const want = (await ask()).text;
  const crowd = [];
  const answers = [];
  await Promise.all(Array.from({length: 1000}, (_, i) => new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1", () => {
      if (i % 4 === 1) sock.write("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le");
      if (i % 4 === 2) sock.write("POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"pro");
      if (i % 4 === 3) sock.end();
      resolve();
    });
    let got = "";
    sock.on("data", (d) => { got += d; });
    sock.on("close", () => answers.push({kind: i % 4, got}));
    sock.on("error", reject);
    crowd.push(sock);
  })));
  const open = await metric(srv, "daisy_http_connections_open");
  assert.ok(open >= 750, `the crowd is connected (${open} open)`);
  for (let round = 0; round < 5; round++) {
    const r = await ask();
    assert.equal(r.text, want);
    assert.ok(r.ms < 1000, `round ${round}: ${r.ms.toFixed(0)} ms with 1,000 idle/slow connections open`);
  }
  // The slow ones are answered 408 once --http-timeout passes, the idle ones closed.
  await new Promise((r) => setTimeout(r, 3500));
  const slow = answers.filter((a) => a.kind === 1 || a.kind === 2);
  assert.equal(slow.length, 500, "every slow connection was ended");
  for (const a of slow) assert.match(a.got, /^HTTP\/1.1 408 Request Timeout[^]*did not arrive within/);
  assert.equal(answers.filter((a) => a.kind === 0).length, 250, "idle connections closed");
  assert.equal(await metric(srv, 'daisy_http_refused_total{reason="timeout"}'), 500);
  for (const s of crowd) s.destroy();
  srv.proc.kill("SIGTERM");
});

test("/metrics reports throughput, queue, micro-batches, timing and KV", async () => {
  for (const name of ["daisy_generated_tokens_total", "daisy_generated_tokens_per_second", "daisy_queue_depth",
                      "daisy_micro_batches_in_flight", "daisy_coordinator_compute_seconds_total",
                      "daisy_ring_wait_seconds_total", "daisy_kv_positions_used", "daisy_kv_positions_capacity",
                      "daisy_time_to_first_token_seconds_count"]) {
    assert.ok(Number.isFinite(await metric(pipe, name)), name);
  }
  assert.ok(await metric(pipe, "daisy_generated_tokens_total") > 0);
  assert.equal(await metric(pipe, "daisy_stages"), 2);
  // Where it computes: the kernel table and the CPU, as the ready line says.
  const text = await (await fetch(`http://127.0.0.1:${pipe.ready.port}/metrics`)).text();
  const esc = (v) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"');
  assert.ok(pipe.ready.cpu.length > 0 && pipe.ready.kernels.length > 0, JSON.stringify(pipe.ready));
  assert.ok(Array.isArray(pipe.ready.kernel_choices), JSON.stringify(pipe.ready));
  assert.ok(text.includes(`daisy_host_info{kernels="${esc(pipe.ready.kernels)}",` +
                          `kernel_choices="${esc(pipe.ready.kernel_choices.join(","))}",cpu="${esc(pipe.ready.cpu)}"} 1\n`), text);
  assert.equal(await metric(pipe, "daisy_kv_positions_capacity"), 4 * 512);
  // Every stage's KV holders, the worker's from its pongs: all free once the requests are done.
  let held = [1, 1];
  for (let i = 0; i < 40 && held.some((h) => h !== 0); i++) {
    held = [await maybeMetric(pipe, 'daisy_stage_sequences{stage="0"}'), await maybeMetric(pipe, 'daisy_stage_sequences{stage="1"}')];
    if (held.some((h) => h !== 0)) await new Promise((r) => setTimeout(r, 250));
  }
  assert.deepEqual(held, [0, 0]);
});

test("with --resume-wait 0, a worker that stops answering fails every user's request within --peer-timeout, named; the server stays up and serves again once it is back", async () => {
  // (With the default --resume-wait the requests are held and resumed instead: resume.test.mjs.)
  const w = await start(["worker", "--shard", path.join(dir, "s2", "stage-1.daisy"), "--listen", "127.0.0.1:0", "-t", "1"]);
  const server = await start(["serve", "--shard", path.join(dir, "s2", "stage-0.daisy"), "--workers", `127.0.0.1:${w.ready.port}`,
                              "--http", "127.0.0.1:0", "-t", "1", "--api-key-file", keyFile, "--ctx", "512",
                              "--peer-timeout", "2", "--resume-wait", "0"]);
  const base = `http://127.0.0.1:${server.ready.port}`;
  const headers = {"Content-Type": "application/json", Authorization: `Bearer ${KEY}`};
  // Two users streaming long answers.
  const streams = PROMPTS.slice(0, 2).map((prompt) => fetch(`${base}/v1/completions`, {
    method: "POST", headers,
    body: JSON.stringify({model: server.ready.model, prompt, max_tokens: 400, temperature: 0, stream: true, ignore_eos: true}),
  }));
  const responses = await Promise.all(streams);
  const readers = responses.map((r) => r.body.getReader());
  const first = await Promise.all(readers.map((r) => r.read()));  // both are generating
  assert.ok(first.every((c) => !c.done));
  const stopped = Date.now();
  w.proc.kill("SIGSTOP");
  try {
    const decoder = new TextDecoder();
    const rest = await Promise.all(readers.map(async (r, i) => {
      let text = decoder.decode(first[i].value);
      for (let c = await r.read(); !c.done; c = await r.read()) text += decoder.decode(c.value);
      return text;
    }));
    const seconds = (Date.now() - stopped) / 1000;
    for (const text of rest) {
      assert.match(text, new RegExp(`worker 127\\.0\\.0\\.1:${w.ready.port} \\(stage 1\\): no answer for 2 s`));
      assert.match(text, /data: \[DONE\]/);
    }
    assert.ok(seconds < 2 + 8, `the streams ended ${seconds.toFixed(1)} s after the stop`);
    // The server itself answers meanwhile.
    const health = await fetch(`${base}/health`);
    assert.equal(health.status, 200);
  } finally {
    w.proc.kill("SIGCONT");
  }
  // Back: the next request rebuilds the ring and gets the text a run alone gives.
  const want = alone(PROMPTS[2], 8);
  const r = await clientFor(server).completions.create({model: server.ready.model, prompt: PROMPTS[2], max_tokens: 8, temperature: 0});
  assert.equal(r.choices[0].text, want.text);
  server.proc.kill("SIGTERM");
  w.proc.kill("SIGTERM");
});
