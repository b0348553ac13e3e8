// Pipeline speed, side by side in one run (bench/README: alternate, repeat, min/median/max).
// Every node is a process pinned to its own core (taskset), one compute thread each:
//   mono      the whole model (a 1-stage shard) on core 0
//   inproc2/3 the 2-/3-stage split chained inside one process on core 0
//   loop2     stage 0 (coordinator) on core 0, stage 1 (worker) on core 1, over loopback
//   proxyD    loop2 through `daisy proxy` adding D ms per hop (each direction), D in --delays
// Reports decode tokens/s, the ratios to mono, the per-hop overhead (loop2 vs inproc2, per
// token, two hops per token), worker load time, and activation bytes per token per hop for each
// wire type (measured from the coordinator's byte counter). Prints one JSON object (last line).
//
// One warm-up pass of every configuration runs first and is not counted.
//
//   node bench/pipeline.mjs [--models 1b,8b] [--rounds 5] [--prompt 16] [--gen 64]
//                           [--delays 10,50,100] [--dir /tmp/daisy-bench] [--mmap-weights]
//                           [--skip-hop]   (the per-hop overhead on a 2-layer, 4096-wide model)
import fs from "node:fs";
import path from "node:path";
import {daisyBinary, parseArgs} from "../tests/parity/lib.mjs";
import {daisyRunner, hopShards, stats} from "./lib.mjs";

const args = parseArgs();
const bin = daisyBinary(args);
const models = (args.models ?? "1b,8b").split(",").filter((m) => m !== "none");
const rounds = Number(args.rounds ?? 5);  // --models none: only the hop overhead
const promptLen = Number(args.prompt ?? 16);
const genLen = Number(args.gen ?? 64);
const delays = (args.delays ?? "10,50,100").split(",").map(Number);
const dir = args.dir ?? "/tmp/daisy-bench";
const copy = args["mmap-weights"] ? ["--mmap-weights"] : [];
fs.mkdirSync(dir, {recursive: true});
const log = (...a) => console.error("[bench]", ...a);
const SHAPES = {"1b": "llama-3.2-1b", "3b": "llama-3.2-3b", "8b": "llama-3.1-8b"};
const {daisy, background} = daisyRunner(bin);

const ids = Array.from({length: promptLen}, (_, i) => (i * 7919) % 120000 + 10).join(",");
const runArgs = ["--ids", ids, "-n", String(genLen), "--ignore-eos", "--json", "-t", "1", "-b", String(promptLen)];

async function benchModel(name) {
  const file = path.join(dir, `${name}-q4_0.gguf`);
  if (!fs.existsSync(file)) {
    log(`generating ${file}`);
    daisy(["gen-model", "--shape", SHAPES[name], "--type", "q4_0", "-o", file, "--json"]);
  }
  const shardDir = (n) => path.join(dir, `${name}-q4_0-s${n}`);
  const compiled = {};
  for (const n of [1, 2, 3]) {
    if (!fs.existsSync(path.join(shardDir(n), `stage-${n - 1}.daisy`))) {
      log(`compiling ${name} into ${n} stages`);
      compiled[n] = daisy(["compile", "-m", file, "--stages", String(n), "-o", shardDir(n), "--json"]);
    }
  }
  const shard = (n, s) => path.join(shardDir(n), `stage-${s}.daisy`);
  const worker = await background(["worker", "--shard", shard(2, 1), "--listen", "127.0.0.1:0", "-t", "1", ...copy], 1);
  const wport = worker.ready.port;
  const proxies = {};
  for (const d of delays) {
    proxies[d] = await background(["proxy", "--listen", "127.0.0.1:0", "--to", `127.0.0.1:${wport}`, "--delay", String(d)], 1);
  }
  const configs = {
    mono: () => daisy(["run", "--shard", shard(1, 0), ...copy, ...runArgs], 0),
    inproc2: () => daisy(["run", "--shard", shard(2, 0), "--shard", shard(2, 1), ...copy, ...runArgs], 0),
    inproc3: () => daisy(["run", "--shard", shard(3, 0), "--shard", shard(3, 1), "--shard", shard(3, 2), ...copy, ...runArgs], 0),
    loop2: () => daisy(["run", "--shard", shard(2, 0), "--workers", `127.0.0.1:${wport}`, ...copy, ...runArgs], 0),
  };
  for (const d of delays) {
    configs[`proxy${d}`] = () => daisy(["run", "--shard", shard(2, 0), "--workers", `127.0.0.1:${proxies[d].ready.port}`, ...copy, ...runArgs], 0);
  }
  const decode = Object.fromEntries(Object.keys(configs).map((k) => [k, []]));
  const prompt = Object.fromEntries(Object.keys(configs).map((k) => [k, []]));
  const overhead = [];
  const hugePages = {worker: worker.ready.huge_page_bytes};
  for (const k of Object.keys(configs)) {
    hugePages[k] = configs[k]().huge_page_bytes;
    log(`${name} warm-up ${k}`);
  }
  for (let r = 0; r < rounds; r++) {
    const keys = Object.keys(configs);
    if (r % 2 === 1) keys.reverse();  // alternate the order round by round
    const got = {};
    for (const k of keys) {
      const j = configs[k]();
      got[k] = j;
      decode[k].push(j.decode_tok_s);
      prompt[k].push(j.prompt_tok_s);
      log(`${name} round ${r + 1} ${k}: decode ${j.decode_tok_s.toFixed(2)} tok/s, prompt ${j.prompt_tok_s.toFixed(1)} tok/s`);
    }
    overhead.push(((1 / got.loop2.decode_tok_s - 1 / got.inproc2.decode_tok_s) / 2) * 1e6);
  }
  // Activation bytes per decode token per hop: the coordinator's counter for two lengths.
  const wire = {};
  for (const w of ["f32", "bf16", "f16", "q8_0"]) {
    const bytes = (n) => daisy(["run", "--shard", shard(2, 0), "--workers", `127.0.0.1:${wport}`, "--wire", w, "--ids", ids, "-n", String(n), "--ignore-eos", "--json", "-t", "1", "-b", String(promptLen)], 0).wire_bytes_sent;
    wire[w] = (bytes(17) - bytes(9)) / 8;
  }
  worker.proc.kill("SIGTERM");
  for (const p of Object.values(proxies)) p.proc.kill("SIGTERM");
  const med = (k) => stats(decode[k]).median;
  const ratios = Object.fromEntries(Object.keys(configs).filter((k) => k !== "mono").map((k) => [k, med(k) / med("mono")]));
  return {
    model: `${SHAPES[name]} q4_0`,
    decode_tok_s: Object.fromEntries(Object.entries(decode).map(([k, v]) => [k, stats(v)])),
    prompt_tok_s: Object.fromEntries(Object.entries(prompt).map(([k, v]) => [k, stats(v)])),
    ratio_to_mono_median: ratios,
    per_hop_overhead_us: stats(overhead),
    wire_bytes_per_token_per_hop: wire,
    worker_load_seconds: worker.ready.load_seconds,
    huge_page_bytes: hugePages,
    compile: compiled,
  };
}

// The per-hop overhead itself, where compute does not drown it: a 2-layer model with the 8B's
// width (4096: 16 KiB of f32 activations per hop) split in two, in-process vs over loopback,
// 256 tokens per run, alternating. Overhead per hop = (1/loop - 1/inproc) / 2 per token.
async function hopOverhead() {
  const [s0, s1] = hopShards(daisy, dir);
  const worker = await background(["worker", "--shard", s1, "--listen", "127.0.0.1:0", "-t", "1"], 1);
  const args = ["--ids", "1,2,3,4", "-n", "256", "--ignore-eos", "--json", "-t", "1"];
  const inproc = [], loop = [], us = [];
  for (let r = 0; r < Math.max(rounds, 5); r++) {
    const a = daisy(["run", "--shard", s0, "--shard", s1, ...args], 0).decode_tok_s;
    const b = daisy(["run", "--shard", s0, "--workers", `127.0.0.1:${worker.ready.port}`, ...args], 0).decode_tok_s;
    inproc.push(a);
    loop.push(b);
    us.push(((1 / b - 1 / a) / 2) * 1e6);
    log(`hop overhead round ${r + 1}: in-process ${a.toFixed(0)} tok/s, loopback ${b.toFixed(0)} tok/s, ${us[us.length - 1].toFixed(0)} us per hop`);
  }
  worker.proc.kill("SIGTERM");
  return {d_model: 4096, layers: 2, inproc_tok_s: stats(inproc), loop_tok_s: stats(loop), per_hop_us: stats(us)};
}

const results = [];
for (const m of models) results.push(await benchModel(m));
const hop = args["skip-hop"] ? null : await hopOverhead();
console.log(JSON.stringify({bench: "pipeline", rounds, prompt: promptLen, gen: genLen, delays_ms: delays,
                            mmap_weights: copy.length > 0, results, hop_overhead: hop}));
process.exit(0);
