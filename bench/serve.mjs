// Serving throughput, side by side in one run (alternate, repeat, min/median/max):
//   mono      `daisy serve` on the whole model (a 1-stage shard), one core
//   pipe2     `daisy serve` running stage 0 on core 0, a worker with stage 1 on core 1
//   pipe2dD   the same through `daisy proxy` adding D ms per hop (each direction)
// For U concurrent users (--users, default 1,2,4,8) each streaming --gen tokens after a
// --prompt-token prompt (greedy, ignore_eos): aggregate tokens/s (all users' tokens over the
// wall time), per-user decode tokens/s (tokens after the first over the time after the first)
// and time to first token. Ratios are to mono with one user. Prints one JSON object (last line).
// With --draft D every server also drafts with D (`daisy serve --draft`), and each measurement
// runs twice, alternating: plain (requests with "speculative": false) and speculative (`<server>
// +spec`, with the acceptance and tokens per verify from the requests' usage). --request-ks
// 3,4 adds requests that fix their own K (`"speculative_k"`, rows `<server>+k3` ...) to the
// alternation: adaptive and fixed K on the same server, prompts and links; adaptive requests
// still start from the last adaptive one's K controller. --prompts N: round r uses prompt set
// r mod N. A --models entry is a shape (1b, 8b: generated) or a .gguf path (compiled next to
// it); --servers picks servers. --ab BIN also starts every server from another daisy binary
// (an older build: rows `<server>@ab`), measured in the same alternation, for before/after.
//
//   node bench/serve.mjs [--models 1b,8b] [--rounds 3] [--users 1,2,4,8] [--prompt 16]
//                        [--gen 32] [--delays 50] [--servers mono,pipe2,pipe2d50]
//                        [--draft D.gguf] [--spec-k N] [--request-ks 3,4] [--prompts 1]
//                        [--ab OLD_DAISY] [--dir /tmp/daisy-bench]
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
const draft = args.draft;
const specK = args["spec-k"];
const requestKs = (args["request-ks"] ?? "").split(",").filter(Boolean).map(Number);
const nPrompts = Math.max(1, Number(args.prompts ?? 1));
if (requestKs.length && !draft) throw new Error("--request-ks needs --draft");
const wanted = args.servers ? new Set(args.servers.split(",")) : null;
const want = (name) => !wanted || wanted.has(name);
const dir = args.dir ?? "/tmp/daisy-bench";
const maxUsers = Math.max(...users);
fs.mkdirSync(dir, {recursive: true});
const log = (...a) => console.error("[bench]", ...a);
const SHAPES = {"1b": "llama-3.2-1b", "3b": "llama-3.2-3b", "8b": "llama-3.1-8b"};
const {daisy, background} = daisyRunner(bin);
const runners = [{suffix: "", background}];
if (args.ab) {
  if (!fs.existsSync(args.ab)) throw new Error(`--ab ${args.ab}: no such file`);
  runners.push({suffix: "@ab", background: daisyRunner(args.ab).background});
}

// One streamed completion; returns {tokens, ttft, decoded, decodeSeconds} (seconds from its own
// start; decoded: the tokens after the first update, over decodeSeconds). `speculative`: false,
// true (the server's K), or a number (the request's own K).
async function oneUser(port, model, salt, speculative) {
  const spec = typeof speculative === "number" ? {speculative: true, speculative_k: speculative} : {speculative};
  const prompt = Array.from({length: promptLen}, (_, i) => ((i + 1) * 7919 + salt * 104729) % 120000 + 10);
  const t0 = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({model, prompt, max_tokens: genLen, temperature: 0, stream: true, ignore_eos: true,
                          stream_options: {include_usage: true, continuous_usage_stats: true},
                          ...(draft ? spec : {})}),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  // Every chunk carries the completion tokens so far (stream_options.continuous_usage_stats),
  // so tokens are timed even when they add no text (control tokens, half a UTF-8 character).
  let first = 0, firstTokens = 0, last = 0, tokens = 0, buf = "", details = null, specUsage = null;
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
      if (j.usage?.completion_tokens_details) details = j.usage.completion_tokens_details;
      if (j.usage?.speculative) specUsage = j.usage.speculative;
      if (!j.usage || j.usage.completion_tokens <= tokens) continue;
      const now = performance.now();
      if (!first) [first, firstTokens] = [now, j.usage.completion_tokens];
      last = now;
      tokens = j.usage.completion_tokens;
    }
  }
  if (tokens !== genLen) throw new Error(`${tokens} tokens streamed, ${genLen} asked`);
  return {tokens, ttft: (first - t0) / 1000, decoded: tokens - firstTokens, decodeSeconds: (last - first) / 1000,
          accepted: details?.accepted_prediction_tokens ?? 0, rejected: details?.rejected_prediction_tokens ?? 0,
          verifies: specUsage?.verifies ?? 0};
}

async function measure(server, n, speculative, round = 0) {
  const t0 = performance.now();
  const salt = (round % nPrompts) * 64;
  const rs = await Promise.all(Array.from({length: n}, (_, u) => oneUser(server.ready.port, server.ready.model, salt + u, speculative)));
  const wall = (performance.now() - t0) / 1000;
  const total = rs.reduce((a, r) => a + r.tokens, 0);
  const accepted = rs.reduce((a, r) => a + r.accepted, 0), rejected = rs.reduce((a, r) => a + r.rejected, 0);
  const verifies = rs.reduce((a, r) => a + r.verifies, 0);
  return {
    aggregate: total / wall, wall, total,
    kMean: verifies > 0 ? (accepted + rejected) / verifies : null,
    perUser: rs.map((r) => r.decoded / r.decodeSeconds).sort((a, b) => a - b)[Math.floor(n / 2)],
    ttft: rs.map((r) => r.ttft).sort((a, b) => a - b)[Math.floor(n / 2)],
    acceptance: accepted + rejected > 0 ? accepted / (accepted + rejected) : null,
  };
}

async function benchModel(name) {
  const given = name.endsWith(".gguf");
  const file = given ? name : path.join(dir, `${name}-q4_0.gguf`);
  if (!fs.existsSync(file)) {
    if (given) throw new Error(`${file}: no such model`);
    log(`generating ${file}`);
    daisy(["gen-model", "--shape", SHAPES[name], "--type", "q4_0", "-o", file, "--json"]);
  }
  const shardDir = (n) => `${file.replace(/\.gguf$/, "")}-s${n}`;
  for (const n of want("mono") ? [1, 2] : [2]) {
    if (!fs.existsSync(path.join(shardDir(n), `stage-${n - 1}.daisy`))) {
      log(`compiling ${name} into ${n} stages`);
      daisy(["compile", "-m", file, "--stages", String(n), "-o", shardDir(n), "--json"]);
    }
  }
  const shard = (n, s) => path.join(shardDir(n), `stage-${s}.daisy`);
  const ctx = String(promptLen + genLen + 8 + (draft ? 16 : 0));
  const serveArgs = ["--http", "127.0.0.1:0", "-t", "1", "--ctx", ctx, "--max-seqs", String(maxUsers),
                     "--prefill-chunk", String(promptLen)];
  if (draft) serveArgs.push("--draft", draft, ...(specK ? ["--spec-k", String(specK)] : []));
  const servers = {}, extra = [];
  for (const {suffix, background} of runners) {
    if (want("mono")) servers[`mono${suffix}`] = await background(["serve", "--shard", shard(1, 0), ...serveArgs], 0);
    if (want("pipe2")) {
      const worker = await background(["worker", "--shard", shard(2, 1), "--listen", "127.0.0.1:0", "-t", "1"], 1);
      servers[`pipe2${suffix}`] = await background(["serve", "--shard", shard(2, 0), "--workers", `127.0.0.1:${worker.ready.port}`, ...serveArgs], 0);
      extra.push(worker);
    }
    for (const d of delays) {
      if (!want(`pipe2d${d}`)) continue;
      // Each delayed pipeline has its own worker (a worker serves one coordinator at a time).
      const w = await background(["worker", "--shard", shard(2, 1), "--listen", "127.0.0.1:0", "-t", "1"], 1);
      const p = await background(["proxy", "--listen", "127.0.0.1:0", "--to", `127.0.0.1:${w.ready.port}`, "--delay", String(d)], 1);
      servers[`pipe2d${d}${suffix}`] = await background(["serve", "--shard", shard(2, 0), "--workers", `127.0.0.1:${p.ready.port}`, ...serveArgs], 0);
      extra.push(w, p);
    }
  }
  // Each server measured plain and, with --draft, speculative (a "+spec" row).
  const modes = draft ? [false, true, ...requestKs] : [false];
  const label = (k, spec) => (typeof spec === "number" ? `${k}+k${spec}` : spec ? `${k}+spec` : k);
  const results = {};
  for (const k of Object.keys(servers)) {
    for (const spec of modes) {
      results[label(k, spec)] = Object.fromEntries(users.map((u) => [u, {aggregate: [], perUser: [], ttft: [], acceptance: [],
                                                                           kMean: [], wall: 0, total: 0}]));
      await measure(servers[k], 1, spec);  // warm-up
    }
  }
  for (let r = 0; r < rounds; r++) {
    const keys = Object.keys(servers);
    if (r % 2 === 1) keys.reverse();
    for (const k of keys) {
      for (const u of users) {
        for (const spec of r % 2 === 1 ? [...modes].reverse() : modes) {
          const m = await measure(servers[k], u, spec, r);
          const x = results[label(k, spec)][u];
          for (const f of ["aggregate", "perUser", "ttft"]) x[f].push(m[f]);
          if (m.acceptance !== null) x.acceptance.push(m.acceptance);
          if (m.kMean !== null) x.kMean.push(m.kMean);
          x.wall += m.wall, x.total += m.total;
          log(`${name} round ${r + 1} ${label(k, spec)} users=${u}: aggregate ${m.aggregate.toFixed(2)} tok/s, per user ` +
              `${m.perUser.toFixed(2)}, ttft ${m.ttft.toFixed(3)} s` +
              (m.acceptance !== null ? `, acceptance ${(100 * m.acceptance).toFixed(0)}%` : ""));
        }
      }
    }
  }
  for (const s of [...Object.values(servers), ...extra]) s.proc.kill("SIGTERM");
  const out = {};
  for (const [k, byUsers] of Object.entries(results)) {
    out[k] = Object.fromEntries(Object.entries(byUsers).map(([u, m]) => [u, {
      aggregate_tok_s: stats(m.aggregate), per_user_tok_s: stats(m.perUser), ttft_s: stats(m.ttft),
      mean_tok_s: m.total / m.wall,  // over all rounds (and prompts): total tokens over total time
      ...(m.acceptance.length ? {acceptance: stats(m.acceptance).median} : {}),
      ...(m.kMean.length ? {k_mean: stats(m.kMean).median} : {})}]));
  }
  const base = out[Object.keys(out)[0]][users[0]].aggregate_tok_s.median;
  const ratios = {};
  for (const [k, byUsers] of Object.entries(out)) {
    ratios[k] = Object.fromEntries(Object.entries(byUsers).map(([u, m]) => [u, m.aggregate_tok_s.median / base]));
  }
  return {model: given ? file : `${SHAPES[name]} q4_0`, draft: draft ?? null, results: out,
          [`aggregate_ratio_to_${Object.keys(out)[0]}_${users[0]}_user`]: ratios};
}

const all = [];
for (const m of models) all.push(await benchModel(m));
console.log(JSON.stringify({bench: "serve", rounds, users, prompt: promptLen, gen: genLen, delays_ms: delays, prompts: nPrompts,
                            request_ks: requestKs, results: all}));
process.exit(0);
