// Nothing lost when a machine fails: `daisy serve` on a 3-stage pipeline (two workers on
// loopback, and a 4-stage one) with 4 concurrent streamed users; a worker is SIGKILLed (and restarted on its port)
// or SIGSTOPped (and continued), mid-prefill and mid-decode, the first and the last worker, with
// and without speculative decoding. Every request completes, and its text equals the
// uninterrupted run's; /metrics counts the failure, the resume and the tokens each stage read
// again: only the stages up to the one that lost its KV read the history, the others (every
// stage, when a stopped worker comes back) the last token of each request. With
// no worker back within --resume-wait, the requests fail naming the reason. Runs the binary
// named by $DAISY.
import assert from "node:assert/strict";
import path from "node:path";
import {after, before, test} from "node:test";
import OpenAI from "openai";
import {tokenizerJson} from "../parity/lib.mjs";
import {harness} from "./lib.mjs";

const {dir, must, start, makeModel} = harness("resume");
const live = new Set();
after(() => live.forEach((p) => p.proc.kill("SIGKILL")));

let model, shards;
const PROMPTS = ["The history of the", "Once upon a time", "1, 2, 3,", "Pipelines split models"];
const LONG = "A very long prompt about many things: " + "data and models and networks and ".repeat(40);

before(() => {
  model = makeModel("m", ["--shape", "small", "--layers", "6", "--type", "q8_0", "--seed", "31", "--tokenizer", tokenizerJson("llama3")]);
  shards = path.join(dir, "s3");
  must(["compile", "-m", model, "--stages", "3", "-o", shards]);
  must(["compile", "-m", model, "--stages", "4", "-o", path.join(dir, "s4")]);
});

let stages = 3;  // the pipeline cluster() builds: 3 (shards s3) or 4 (s4)
const shardOf = (stage) => path.join(dir, `s${stages}`, `stage-${stage}.daisy`);

async function worker(stage, port = 0) {
  const w = await start(["worker", "--shard", shardOf(stage), "--listen", `127.0.0.1:${port}`, "-t", "1"]);
  live.add(w);
  return w;
}

async function cluster(extra = []) {
  const ws = [];
  for (let i = 1; i < stages; i++) ws.push(await worker(i));
  const s = await start(["serve", "--shard", shardOf(0), "--workers",
                         ws.map((w) => `127.0.0.1:${w.port}`).join(","), "--http", "127.0.0.1:0", "-t", "1",
                         "--ctx", "1024", "--max-seqs", "4", "--peer-timeout", "2", "--connect-timeout", "5",
                         ...(extra.includes("--prefill-chunk") ? [] : ["--prefill-chunk", "16"]), ...extra]);
  live.add(s);
  s.client = new OpenAI({baseURL: `http://127.0.0.1:${s.port}/v1`, apiKey: "none", maxRetries: 0, timeout: 120000});
  return {s, ws};
}

// Streams one request; resolves to its text. `onChunk` sees the running text.
async function stream(client, model_, prompt, n, onChunk = () => {}) {
  const st = await client.completions.create({model: model_, prompt, max_tokens: n, temperature: 0, stream: true});
  let text = "";
  for await (const c of st) {
    text += c.choices[0]?.text ?? "";
    onChunk(text);
  }
  return text;
}

let baseline;

test("the uninterrupted run", async () => {
  const {s, ws} = await cluster();
  baseline = await Promise.all([...PROMPTS.map((p) => stream(s.client, s.ready.model, p, 120)),
                                stream(s.client, s.ready.model, LONG, 40)]);
  for (const t of baseline) assert.ok(t.length > 0);
  for (const p of [s, ...ws]) p.proc.kill("SIGTERM");
});

// Runs the 5 requests (4 short prompts, one long one) while `fault` strikes; checks the texts.
// `lost`: the stage whose KV the fault destroys (a killed worker), or "none" (a stopped worker
// or a cut link keeps it): only the stages up to it read the history again; every other stage
// reads one token per resumed request (the last, for the next token), give or take the rows
// of prompt chunks that were in flight.
async function survive(name, extra, fault, {immediately = false, failedStage = null, strikeAfter = 0, lost = null} = {}) {
  const {s, ws} = await cluster(extra);
  const seen = new Array(5).fill(0);
  let struck = null;
  const strike = () => {
    if (struck === null && seen.slice(0, 4).some((n) => n >= strikeAfter)) struck = fault(ws, seen);
  };
  const runs = [...PROMPTS.map((p, i) => stream(s.client, s.ready.model, p, 120, (t) => {
    seen[i] = t.length;
    strike();
  })), stream(s.client, s.ready.model, LONG, 40, (t) => (seen[4] = t.length))];
  if (immediately) strike();
  const texts = await Promise.all(runs);
  await struck;
  texts.forEach((t, i) => assert.equal(t, baseline[i], `${name}: request ${i}`));
  const metrics = await (await fetch(`http://127.0.0.1:${s.port}/metrics`)).text();
  const value = (m) => Number(metrics.match(new RegExp(`^${m} (\\S+)$`, "m"))?.[1]);
  assert.ok(value("daisy_ring_failures_total") >= 1, metrics);
  assert.ok(value("daisy_resumes_total") >= 1, metrics);
  assert.ok(value("daisy_refilled_tokens_total") > 0, metrics);
  assert.ok(value("daisy_paused_seconds_total") > 0, metrics);
  if (lost !== null) {
    const read = [];
    for (let i = 0; i < stages; i++) read.push(value(`daisy_stage_refilled_tokens_total\\{stage="${i}"\\}`));
    const little = 5 * value("daisy_resumes_total") + 48;
    for (let i = 0; i < stages; i++) {
      if (lost !== "none" && i <= lost) {
        assert.equal(read[i], read[lost], `${name}: stage ${i} reads what stage ${lost} lost: ${read}`);
        assert.ok(read[i] > little, `${name}: stage ${i} lost a history: ${read}`);
      } else {
        assert.ok(read[i] <= little, `${name}: stage ${i} kept its KV, so reads little again: ${read}`);
      }
    }
  }
  if (failedStage !== null) {
    // The failure is put down to the stage whose worker was lost.
    assert.ok(value(`daisy_stage_failures_total\\{stage="${failedStage}"\\}`) >= 1, metrics);
    assert.equal(value('daisy_stage_failures_total\\{stage="0"\\}'), 0, metrics);
    // The resume and the pause are put down to it too.
    assert.ok(value(`daisy_stage_resumes_total\\{stage="${failedStage}"\\}`) >= 1, metrics);
    assert.ok(value(`daisy_stage_paused_seconds_total\\{stage="${failedStage}"\\}`) > 0, metrics);
    assert.equal(value('daisy_stage_paused_seconds_total\\{stage="0"\\}'), 0, metrics);
  }
  for (const p of [s, ...ws]) p.proc.kill("SIGTERM");
}

// Kills worker `i` once the decode is under way, and starts it again on its port.
const killAndRestart = (i, delay = 300) => async (ws) => {
  const port = ws[i].port;
  ws[i].proc.kill("SIGKILL");
  await new Promise((r) => setTimeout(r, delay));
  ws[i] = await worker(i + 1, port);
};

test("SIGKILL of the last worker mid-decode: every request completes exactly", async () => {
  await survive("last worker killed", [], killAndRestart(1), {failedStage: 2, strikeAfter: 80, lost: 2});
});

test("SIGKILL of the middle worker mid-decode, with speculative decoding: every request completes exactly", async () => {
  await survive("middle worker killed, lookup", ["--lookup"], killAndRestart(0), {failedStage: 1, strikeAfter: 80, lost: 1});
});

test("SIGSTOP of a worker past --peer-timeout, then SIGCONT: every request completes exactly", async () => {
  await survive("worker stopped", [], async (ws) => {
    ws[0].proc.kill("SIGSTOP");
    await new Promise((r) => setTimeout(r, 3000));
    ws[0].proc.kill("SIGCONT");
  }, {failedStage: 1, strikeAfter: 80, lost: "none"});
});

test("SIGSTOP of the last worker past --peer-timeout, with speculative decoding: every request completes exactly", async () => {
  await survive("last worker stopped, lookup", ["--lookup"], async (ws) => {
    ws[1].proc.kill("SIGSTOP");
    await new Promise((r) => setTimeout(r, 3000));
    ws[1].proc.kill("SIGCONT");
  }, {failedStage: 2, strikeAfter: 80, lost: "none"});
});

test("4 stages, SIGKILL of the middle worker (stage 2): every request completes exactly", async () => {
  stages = 4;
  try {
    await survive("middle of 4 killed", [], killAndRestart(1), {failedStage: 2, strikeAfter: 80, lost: 2});
  } finally {
    stages = 3;
  }
});

test("SIGKILL mid-prefill: the requests still reading their prompts complete exactly", async () => {
  await survive("killed mid-prefill", ["--prefill-chunk", "4"], killAndRestart(1, 100), {immediately: true});
});

test("no worker back within --resume-wait: the requests fail with the reason; the server stays up", async () => {
  const {s, ws} = await cluster(["--resume-wait", "2"]);
  const t0 = Date.now();
  const pending = s.client.completions.create({model: s.ready.model, prompt: PROMPTS[0], max_tokens: 400, temperature: 0})
    .then(() => null, (e) => e);
  await new Promise((r) => setTimeout(r, 300));
  ws[1].proc.kill("SIGKILL");
  const err = await pending;
  assert.ok(err, "the request must fail");
  assert.match(String(err.message), /not back within 2 s/);
  assert.ok(Date.now() - t0 < 30000);
  assert.equal((await fetch(`http://127.0.0.1:${s.port}/health`)).status, 200);
  for (const p of [s, ...ws]) p.proc.kill("SIGTERM");
});

test("a standby worker takes a lost worker's stage (checked by fingerprint): every request completes exactly", async () => {
  const w1 = await worker(1), standby = await worker(1), w2 = await worker(2), wrong = await worker(2);
  // Stage 1's candidates: w1, then a worker holding stage 2's shard (refused), then the standby.
  const s = await start(["serve", "--shard", path.join(shards, "stage-0.daisy"), "--workers",
                         `127.0.0.1:${w1.port}|127.0.0.1:${wrong.port}|127.0.0.1:${standby.port},127.0.0.1:${w2.port}`,
                         "--http", "127.0.0.1:0", "-t", "1", "--ctx", "1024", "--max-seqs", "4", "--prefill-chunk", "16",
                         "--peer-timeout", "2", "--connect-timeout", "10"]);
  live.add(s);
  s.client = new OpenAI({baseURL: `http://127.0.0.1:${s.port}/v1`, apiKey: "none", maxRetries: 0, timeout: 120000});
  let killed = false;
  const texts = await Promise.all(PROMPTS.map((p) => stream(s.client, s.ready.model, p, 120, () => {
    if (!killed) {
      killed = true;
      w1.proc.kill("SIGKILL");  // and it never comes back
    }
  })));
  texts.forEach((t, i) => assert.equal(t, baseline[i], `request ${i}`));
  assert.match(s.stderr(), new RegExp(`stage 1 moves to worker 127\\.0\\.0\\.1:${standby.port}`));
  assert.match(s.stderr(), /holds stage 2 of model .*, not stage 1/);
  for (const p of [s, standby, w2, wrong]) p.proc.kill("SIGTERM");
});
