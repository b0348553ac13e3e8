// Serving throughput, side by side in one run (alternate, repeat, min/median/max):
//   mono      `daisy serve` on the whole model (a 1-stage shard), one core
//   pipe2     `daisy serve` running stage 0 on core 0, a worker with stage 1 on core 1
//   pipe2dD   the same through `daisy proxy` adding D ms per hop (each direction)
// For U concurrent users (--users, default 1,2,4,8) each streaming --gen tokens after a
// --prompt-token prompt (greedy, ignore_eos): aggregate tokens/s (all users' tokens over the
// wall time), per-user decode tokens/s (tokens after the first over the time after the first)
// and time to first token. Ratios are to mono with one user. Prints one JSON object (last line).
//
//   node bench/serve.mjs [--models 1b,8b] [--rounds 3] [--users 1,2,4,8] [--prompt 16]
//                        [--gen 32] [--delays 50] [--dir /tmp/daisy-bench]
import fs from "node:fs";
import path from "node:path";
import {daisyBinary, parseArgs} from "../tests/parity/lib.mjs";
import {daisyRunner, stats} from "./lib.mjs";

const args = parseArgs();
const bin = daisyBinary(args);
const models = (args.models ?? "1b,8b").split(",");
const rounds = Number(args.rounds ?? 3);
const users = (args.users ?? "1,2,4,8").split(",").map(Number);
const promptLen = Number(args.prompt ?? 16);
const genLen = Number(args.gen ?? 32);
const delays = (args.delays ?? "50").split(",").filter(Boolean).map(Number);
const dir = args.dir ?? "/tmp/daisy-bench";
const maxUsers = Math.max(...users);
fs.mkdirSync(dir, {recursive: true});
const log = (...a) => console.error("[bench]", ...a);
const SHAPES = {"1b": "llama-3.2-1b", "3b": "llama-3.2-3b", "8b": "llama-3.1-8b"};
const {daisy, background} = daisyRunner(bin);

// One streamed completion; returns {tokens, ttft, decoded, decodeSeconds} (seconds from its own
// start; decoded: the tokens after the first update, over decodeSeconds).
async function oneUser(port, model, salt) {
  const prompt = Array.from({length: promptLen}, (_, i) => ((i + 1) * 7919 + salt * 104729) % 120000 + 10);
  const t0 = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({model, prompt, max_tokens: genLen, temperature: 0, stream: true, ignore_eos: true,
                          stream_options: {include_usage: true, continuous_usage_stats: true}}),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  // Every chunk carries the completion tokens so far (stream_options.continuous_usage_stats),
  // so tokens are timed even when they add no text (control tokens, half a UTF-8 character).
  let first = 0, firstTokens = 0, last = 0, tokens = 0, buf = "";
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buf += decoder.decode(chunk, {stream: true});
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const j = JSON.parse(event.slice(6));
      if (j.error) throw new Error(j.error.message);
      if (!j.usage || j.usage.completion_tokens <= tokens) continue;
      const now = performance.now();
      if (!first) [first, firstTokens] = [now, j.usage.completion_tokens];
      last = now;
      tokens = j.usage.completion_tokens;
    }
  }
  if (tokens !== genLen) throw new Error(`${tokens} tokens streamed, ${genLen} asked`);
  return {tokens, ttft: (first - t0) / 1000, decoded: tokens - firstTokens, decodeSeconds: (last - first) / 1000};
}

async function measure(server, n) {
  const t0 = performance.now();
  const rs = await Promise.all(Array.from({length: n}, (_, u) => oneUser(server.ready.port, server.ready.model, u)));
  const wall = (performance.now() - t0) / 1000;
  const total = rs.reduce((a, r) => a + r.tokens, 0);
  return {
    aggregate: total / wall,
    perUser: rs.map((r) => r.decoded / r.decodeSeconds).sort((a, b) => a - b)[Math.floor(n / 2)],
    ttft: rs.map((r) => r.ttft).sort((a, b) => a - b)[Math.floor(n / 2)],
  };
}

async function benchModel(name) {
  const file = path.join(dir, `${name}-q4_0.gguf`);
  if (!fs.existsSync(file)) {
    log(`generating ${file}`);
    daisy(["gen-model", "--shape", SHAPES[name], "--type", "q4_0", "-o", file, "--json"]);
  }
  const shardDir = (n) => path.join(dir, `${name}-q4_0-s${n}`);
  for (const n of [1, 2]) {
    if (!fs.existsSync(path.join(shardDir(n), `stage-${n - 1}.daisy`))) {
      log(`compiling ${name} into ${n} stages`);
      daisy(["compile", "-m", file, "--stages", String(n), "-o", shardDir(n), "--json"]);
    }
  }
  const shard = (n, s) => path.join(shardDir(n), `stage-${s}.daisy`);
  const ctx = String(promptLen + genLen + 8);
  const serveArgs = ["--http", "127.0.0.1:0", "-t", "1", "--ctx", ctx, "--max-seqs", String(maxUsers),
                     "--prefill-chunk", String(promptLen)];
  const servers = {};
  servers.mono = await background(["serve", "--shard", shard(1, 0), ...serveArgs], 0);
  const worker = await background(["worker", "--shard", shard(2, 1), "--listen", "127.0.0.1:0", "-t", "1"], 1);
  servers.pipe2 = await background(["serve", "--shard", shard(2, 0), "--workers", `127.0.0.1:${worker.ready.port}`, ...serveArgs], 0);
  const extra = [];
  for (const d of delays) {
    // Each delayed pipeline has its own worker (a worker serves one coordinator at a time).
    const w = await background(["worker", "--shard", shard(2, 1), "--listen", "127.0.0.1:0", "-t", "1"], 1);
    const p = await background(["proxy", "--listen", "127.0.0.1:0", "--to", `127.0.0.1:${w.ready.port}`, "--delay", String(d)], 1);
    servers[`pipe2d${d}`] = await background(["serve", "--shard", shard(2, 0), "--workers", `127.0.0.1:${p.ready.port}`, ...serveArgs], 0);
    extra.push(w, p);
  }
  const results = {};
  for (const k of Object.keys(servers)) {
    results[k] = Object.fromEntries(users.map((u) => [u, {aggregate: [], perUser: [], ttft: []}]));
    await measure(servers[k], 1);  // warm-up
  }
  for (let r = 0; r < rounds; r++) {
    const keys = Object.keys(servers);
    if (r % 2 === 1) keys.reverse();
    for (const k of keys) {
      for (const u of users) {
        const m = await measure(servers[k], u);
        for (const f of ["aggregate", "perUser", "ttft"]) results[k][u][f].push(m[f]);
        log(`${name} round ${r + 1} ${k} users=${u}: aggregate ${m.aggregate.toFixed(2)} tok/s, per user ${m.perUser.toFixed(2)}, ttft ${m.ttft.toFixed(3)} s`);
      }
    }
  }
  for (const s of [...Object.values(servers), worker, ...extra]) s.proc.kill("SIGTERM");
  const out = {};
  for (const [k, byUsers] of Object.entries(results)) {
    out[k] = Object.fromEntries(Object.entries(byUsers).map(([u, m]) => [u, {
      aggregate_tok_s: stats(m.aggregate), per_user_tok_s: stats(m.perUser), ttft_s: stats(m.ttft)}]));
  }
  const base = out.mono[users[0]].aggregate_tok_s.median;
  const ratios = {};
  for (const [k, byUsers] of Object.entries(out)) {
    ratios[k] = Object.fromEntries(Object.entries(byUsers).map(([u, m]) => [u, m.aggregate_tok_s.median / base]));
  }
  return {model: `${SHAPES[name]} q4_0`, results: out, aggregate_ratio_to_mono_1_user: ratios};
}

const all = [];
for (const m of models) all.push(await benchModel(m));
console.log(JSON.stringify({bench: "serve", rounds, users, prompt: promptLen, gen: genLen, delays_ms: delays, results: all}));
process.exit(0);
