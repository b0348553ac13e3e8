// A broken network between the coordinator and a worker, through `daisy proxy`: added delay and
// jitter, a link cut mid-frame (SIGUSR1), a link that goes silent (SIGUSR2), and a peer that
// accepts and never answers (--blackhole). `daisy serve` runs a 3-stage pipeline whose stage-1
// worker is reached through the proxy (by the coordinator and by the stage before it), with 4
// concurrent streamed users; every case ends in a resume with the texts of the undisturbed run,
// or in a clear error within its timeout. And the links encrypted: with --tls (keyed by the
// cluster key) every hop, worker to worker included, gives the same texts as plain links, and a
// side without TLS is refused by name. Runs the binary named by $DAISY.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {after, before, test} from "node:test";
import OpenAI from "openai";
import {tokenizerJson} from "../parity/lib.mjs";
import {harness} from "./lib.mjs";

const {dir, must, run, start, makeModel, runInBackground} = harness("faults");
const live = new Set();
after(() => live.forEach((p) => p.proc.kill("SIGKILL")));

let shards, model;
const PROMPTS = ["The history of the", "Once upon a time", "1, 2, 3,", "Pipelines split models"];

before(() => {
  model = makeModel("m", ["--shape", "small", "--layers", "6", "--type", "q8_0", "--seed", "41",
                                "--tokenizer", tokenizerJson("llama3")]);
  shards = path.join(dir, "s3");
  must(["compile", "-m", model, "--stages", "3", "-o", shards]);
});

async function spawnLive(args) {
  const p = await start(args);
  live.add(p);
  return p;
}

const worker = (stage, port = 0) =>
  spawnLive(["worker", "--shard", path.join(shards, `stage-${stage}.daisy`), "--listen", `127.0.0.1:${port}`, "-t", "1"]);
const proxy = (to, extra = [], port = 0) =>
  spawnLive(["proxy", "--listen", `127.0.0.1:${port}`, ...(to ? ["--to", `127.0.0.1:${to}`] : []), ...extra]);

// Workers for stages 1 and 2, stage 1 behind a proxy; the server reaches stage 1 through it.
async function cluster(proxyArgs = [], serveArgs = []) {
  const w1 = await worker(1), w2 = await worker(2);
  const px = await proxy(w1.port, proxyArgs);
  const s = await spawnLive(["serve", "--shard", path.join(shards, "stage-0.daisy"), "--workers",
                             `127.0.0.1:${px.port},127.0.0.1:${w2.port}`, "--http", "127.0.0.1:0", "-t", "1",
                             "--ctx", "1024", "--max-seqs", "4", "--prefill-chunk", "16", "--peer-timeout", "2",
                             "--connect-timeout", "5", ...serveArgs]);
  s.client = new OpenAI({baseURL: `http://127.0.0.1:${s.port}/v1`, apiKey: "none", maxRetries: 0, timeout: 120000});
  return {s, w1, w2, px, all: [s, px, w1, w2]};
}

async function stream(client, model, prompt, n, onChunk = () => {}) {
  const st = await client.completions.create({model, prompt, max_tokens: n, temperature: 0, stream: true});
  let text = "";
  for await (const c of st) {
    text += c.choices[0]?.text ?? "";
    onChunk(text);
  }
  return text;
}

async function metric(s, name) {
  const text = await (await fetch(`http://127.0.0.1:${s.port}/metrics`)).text();
  return Number(text.match(new RegExp(`^${name} (\\S+)$`, "m"))?.[1]);
}

const stop = (ps) => ps.forEach((p) => p.proc.kill("SIGTERM"));
let baseline;

test("the undisturbed run (and with 15 ms delay and 10 ms jitter on the link: the same texts)", async () => {
  const plain = await cluster();
  baseline = await Promise.all(PROMPTS.map((p) => stream(plain.s.client, plain.s.ready.model, p, 80)));
  for (const t of baseline) assert.ok(t.length > 0);
  stop(plain.all);
  const wan = await cluster(["--delay", "15", "--jitter", "10", "--seed", "7"]);
  const texts = await Promise.all(PROMPTS.map((p) => stream(wan.s.client, wan.s.ready.model, p, 80)));
  texts.forEach((t, i) => assert.equal(t, baseline[i], `request ${i} over the jittery link`));
  assert.equal(await metric(wan.s, "daisy_ring_failures_total"), 0);
  stop(wan.all);
});

// Runs the 4 requests; `fault(c)` strikes once the first has 20 characters; checks the texts and
// the resume counters.
async function survive(name, fault, serveArgs = []) {
  const c = await cluster([], serveArgs);
  let struck = null;
  const texts = await Promise.all(PROMPTS.map((p) => stream(c.s.client, c.s.ready.model, p, 80, (t) => {
    if (struck === null && t.length >= 20) struck = fault(c);
  })));
  await struck;
  texts.forEach((t, i) => assert.equal(t, baseline[i], `${name}: request ${i}`));
  assert.ok(await metric(c.s, "daisy_ring_failures_total") >= 1, `${name}: a failure was seen`);
  assert.ok(await metric(c.s, "daisy_resumes_total") >= 1, `${name}: and resumed`);
  return c;
}

test("a link cut mid-frame: the ring is rebuilt and every request completes exactly", async () => {
  const c = await survive("cut", async ({px}) => px.proc.kill("SIGUSR1"));
  assert.match(c.px.stderr(), /cutting [1-9]\d* links mid-frame/);
  stop(c.all);
});

test("a link that goes silent: found within --peer-timeout, rebuilt, every request completes exactly", async () => {
  const t0 = Date.now();
  const c = await survive("silent", async ({px}) => px.proc.kill("SIGUSR2"));
  assert.match(c.px.stderr(), /[1-9]\d* links go silent/);
  const paused = await metric(c.s, "daisy_paused_seconds_total");
  assert.ok(paused < 10, `paused ${paused} s`);
  assert.ok(Date.now() - t0 < 60000);
  stop(c.all);
});

test("a worker address that accepts and never answers: serve and run fail within the connect timeout, named", async () => {
  const hole = await proxy(null, ["--blackhole"]);
  const w2 = await worker(2);
  for (const cmd of [["run", "-p", "hello", "-n", "4"], ["serve", "--http", "127.0.0.1:0"]]) {
    const t0 = Date.now();
    const r = run([...cmd, "--shard", path.join(shards, "stage-0.daisy"), "--workers",
                   `127.0.0.1:${hole.port},127.0.0.1:${w2.port}`, "-t", "1", "--peer-timeout", "2",
                   "--connect-timeout", "3"], undefined, 30000);
    const ms = Date.now() - t0;
    assert.notEqual(r.code, 0, cmd[0]);
    assert.match(r.err, new RegExp(`worker 127\\.0\\.0\\.1:${hole.port}: accepted the connection but did not answer within \\d+ ms \\(hung, or not a daisy worker\\)`), cmd[0]);
    assert.ok(ms < 8000, `${cmd[0]} gave up after ${ms} ms`);
  }
  stop([hole, w2]);
});

test("mid-run, the worker's address turns into a black hole: the requests fail within --resume-wait, named; then it serves again", async () => {
  const c = await cluster([], ["--resume-wait", "4"]);
  const port = c.px.port;
  const t0 = Date.now();
  const pending = c.s.client.completions.create({model: c.s.ready.model, prompt: PROMPTS[0], max_tokens: 400, temperature: 0})
    .then(() => null, (e) => e);
  await new Promise((r) => setTimeout(r, 300));
  c.px.proc.kill("SIGKILL");
  // Its listening socket is gone only once it has exited (listening again at once raced it).
  await new Promise((r) => c.px.proc.on("exit", r));
  const hole = await proxy(null, ["--blackhole"], port);
  const err = await pending;
  assert.ok(err, "the request must fail");
  assert.match(String(err.message), /not back within 4 s/);
  assert.ok(Date.now() - t0 < 30000, `failed after ${Date.now() - t0} ms`);
  // The way to the worker is back: the next request is served, exactly.
  hole.proc.kill("SIGKILL");
  await new Promise((r) => hole.proc.on("exit", r));
  const again = await proxy(c.w1.port, [], port);
  let text = null;
  for (let i = 0; i < 20 && text === null; i++) {
    try {
      text = await stream(c.s.client, c.s.ready.model, PROMPTS[1], 80);
    } catch (e) {
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  assert.equal(text, baseline[1]);
  stop([...c.all, again]);
});

test("--tls on every link (cluster key): the same texts as plain links; a worker without TLS is refused by name", async () => {
  const key = path.join(dir, "cluster.key");
  fs.writeFileSync(key, "tls-test-cluster-key-0123456789abcdef\n");
  const secure = ["--key-file", key, "--tls"];
  const w1 = await spawnLive(["worker", "--shard", path.join(shards, "stage-1.daisy"), "--listen", "127.0.0.1:0", "-t", "1", ...secure]);
  const w2 = await spawnLive(["worker", "--shard", path.join(shards, "stage-2.daisy"), "--listen", "127.0.0.1:0", "-t", "1", ...secure]);
  assert.equal(w1.ready.tls, "TLS 1.3 (cluster key)");
  const s = await spawnLive(["serve", "--shard", path.join(shards, "stage-0.daisy"), "--workers",
                             `127.0.0.1:${w1.port},127.0.0.1:${w2.port}`, "--http", "127.0.0.1:0", "-t", "1",
                             "--ctx", "1024", "--max-seqs", "4", "--prefill-chunk", "16", ...secure]);
  const client = new OpenAI({baseURL: `http://127.0.0.1:${s.port}/v1`, apiKey: "none", maxRetries: 0, timeout: 120000});
  const texts = await Promise.all(PROMPTS.map((p) => stream(client, s.ready.model, p, 80)));
  texts.forEach((t, i) => assert.equal(t, baseline[i], `request ${i} over TLS`));
  assert.match(s.stderr(), /links to the workers: TLS 1\.3 \(cluster key\)/);
  // daisy run over the same TLS cluster ends cleanly (exit 0: no SIGPIPE when the links close)
  // with the text of the whole model.
  const overTls = must(["run", "--shard", path.join(shards, "stage-0.daisy"), "--workers",
                        `127.0.0.1:${w1.port},127.0.0.1:${w2.port}`, ...secure, "-p", PROMPTS[2], "-n", "24", "-t", "1",
                        "--json"]);
  const whole = must(["run", "-m", model, "-p", PROMPTS[2], "-n", "24", "-t", "1", "--json"]);
  assert.equal(JSON.parse(overTls.out.trim().split("\n").pop()).text, JSON.parse(whole.out.trim().split("\n").pop()).text);
  // The same cluster without --tls on the coordinator: refused, named.
  const plain = run(["run", "--shard", path.join(shards, "stage-0.daisy"), "--workers", `127.0.0.1:${w1.port},127.0.0.1:${w2.port}`,
                     "--key-file", key, "-p", "hi", "-n", "2", "-t", "1", "--connect-timeout", "3"], undefined, 30000);
  assert.notEqual(plain.code, 0);
  assert.match(plain.err, new RegExp(`127\\.0\\.0\\.1:${w1.port} requires TLS: start this side with --tls`));
  stop([s, w1, w2]);
  // --tls without a key or certificates: named at start.
  const nokey = run(["worker", "--shard", path.join(shards, "stage-1.daisy"), "--listen", "127.0.0.1:0", "--tls"], undefined, 30000);
  assert.notEqual(nokey.code, 0);
  assert.match(nokey.err, /--tls needs the cluster key \(--key-file\) or certificates/);
});

test("daisy run --resume-wait: a link cut mid-generation, the run goes on and prints the uninterrupted text", async () => {
  const want = must(["run", "-m", model, "-p", PROMPTS[3], "-n", "400", "--ignore-eos", "-t", "1"]).out;
  for (const wait of ["20", "0"]) {
    const w1 = await worker(1), w2 = await worker(2);
    const px = await proxy(w1.port);
    const bg = runInBackground(["run", "--shard", path.join(shards, "stage-0.daisy"), "--workers",
                                `127.0.0.1:${px.port},127.0.0.1:${w2.port}`, "-p", PROMPTS[3], "-n", "400", "--ignore-eos",
                                "-t", "1", "--peer-timeout", "2", "--connect-timeout", "5", "--resume-wait", wait]);
    let out = "";
    bg.proc.stdout.on("data", (d) => (out += d));
    while (out.length < 40) await new Promise((r) => setTimeout(r, 10));  // generation is under way
    px.proc.kill("SIGUSR1");
    const r = await bg.done;
    if (wait === "20") {
      assert.equal(r.code, 0, r.err);
      assert.equal(r.out, want, "the text of the uninterrupted run");
      assert.match(r.err, /the pipeline went down \(.*\); waiting up to 20 s for it/);
      // Both workers lived through the cut and kept their KV: every stage reads only the last
      // token again, for the next one.
      assert.match(r.err, /the pipeline is back after [\d.]+ s; reading again 1\/1\/1 tokens \(per stage\)/);
    } else {
      assert.notEqual(r.code, 0, "without --resume-wait the run fails at once");
      assert.match(r.err, /the pipeline is down: worker 127\.0\.0\.1:\d+ \(stage [12]\)/);  // the cut link, or the stage after it
    }
    stop([w1, w2, px]);
  }
});
