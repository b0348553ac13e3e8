// Inference speed, daisy vs llama.cpp (node-llama-cpp 3.21.1), same GGUF files and thread
// counts, alternating the two sides round by round: prompt tokens/s (a 128-token prompt) and
// decode tokens/s (128 generated tokens), with the memory bandwidth each decode achieves
// (weight bytes read per token x tokens/s) beside the machine's read bandwidth measured in the
// same run. Prints one JSON object (the last line); progress goes to stderr.
//
//   node bench/engine.mjs [--models 1b-q4_0,1b-q8_0,8b-q4_0,qwen2.5-7b-q4_k_m,...] [--threads 1,2]
//                         [--rounds 3] [--prompt 128] [--gen 128] [--dir /tmp/daisy-bench]
//                         [--ab OLD_DAISY] [--no-llama] [--kernels avx2] [--llama-cpu haswell]
// --ab runs another daisy build as a third side in the same alternation (a refactor's "within
// noise of the build before", side by side); its ids must equal this build's. --no-llama skips
// llama.cpp (an A/B of two daisy builds alone). --kernels forces daisy's kernel table and
// --llama-cpu llama.cpp's CPU variant (bench/lib.mjs): `--kernels avx2 --llama-cpu haswell` stands
// in for an AVX2-only host on one with more (same cores and memory; no AVX-512 or VNNI on either
// side).
import fs from "node:fs";
import path from "node:path";
import {spawnSync} from "node:child_process";
import {daisyBinary, getReferenceLlama, parseArgs, repoRoot, runDaisy, lastJsonLine} from "../tests/parity/lib.mjs";
import {llamaCpuVariant} from "./lib.mjs";

const args = parseArgs();
const bin = daisyBinary(args);
const kernelsBench = args["kernels-bench"] ?? path.join(repoRoot, "build/bench/daisy-bench-kernels");
const models = (args.models ?? "1b-q4_0,1b-q8_0,8b-q4_0,8b-q8_0").split(",");
const threadCounts = (args.threads ?? "1,2").split(",").map(Number);
const rounds = Number(args.rounds ?? 3);
const promptLen = Number(args.prompt ?? 128);
const genLen = Number(args.gen ?? 128);
const dir = args.dir ?? "/tmp/daisy-bench";
const abBin = args.ab;
const withLlama = !args["no-llama"];
const kernels = args.kernels;
const llamaCpu = args["llama-cpu"];
fs.mkdirSync(dir, {recursive: true});
const log = (...a) => console.error("[bench]", ...a);
const SHAPES = {"1b": "llama-3.2-1b", "3b": "llama-3.2-3b", "8b": "llama-3.1-8b", "70b": "llama-3.1-70b"};

function ensureModel(name) {
  // SIZE-TYPE (1b-q4_0) or SHAPE-TYPE (qwen2.5-7b-q4_k_m, gemma-3-4b-q4_k_m): the type is
  // after the last dash.
  const cut = name.lastIndexOf("-");
  const size = name.slice(0, cut), type = name.slice(cut + 1);
  const file = path.join(dir, `${name}.gguf`);
  if (!fs.existsSync(file)) {
    log(`generating ${file}`);
    runDaisy(bin, ["gen-model", "--shape", SHAPES[size] ?? size, "--type", type, "--seed", "1", "-o", file]);
  }
  return file;
}

// Bytes a decode step reads: every weight except the embedding table (one row of it), unless
// the embedding is also the LM head (tied), in which case all of it.
function bytesPerToken(file) {
  const info = JSON.parse(runDaisy(bin, ["inspect", file, "--json"]));
  const tied = !info.tensors.some(t => t.name === "output.weight");
  return info.tensors.filter(t => tied || t.name !== "token_embd.weight").reduce((a, t) => a + t.bytes, 0);
}

function bandwidth() {
  const r = spawnSync(kernelsBench, ["--bandwidth-only"], {encoding: "utf8"});
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout.trim().split("\n").pop());
}

const promptIds = Array.from({length: promptLen}, (_, i) => 1000 + ((i * 7919) % 120000));

function runOurs(file, threads, which = bin) {
  const out = runDaisy(which, ["run", "-m", file, "--ids", promptIds.join(","), "-n", String(genLen),
                             "--ignore-eos", "--threads", String(threads), "--json",
                             ...(kernels ? ["--kernels", kernels] : [])]);
  const j = lastJsonLine(out);
  return {prompt: j.prompt_tok_s, decode: j.decode_tok_s, ids: j.ids, kernels: j.kernels, choices: j.kernel_choices, cpu: j.cpu};
}

// The ggml CPU variant llama.cpp loaded in this process (libggml-cpu-<variant>.so among the
// mapped files), so a result names it even when ggml picked it.
let llamaLoaded = null;
function loadedLlamaCpuVariant() {
  const maps = fs.readFileSync("/proc/self/maps", "utf8").match(/libggml-cpu-([\w.-]+?)\.so/g) ?? [];
  const names = [...new Set(maps.map(m => m.slice("libggml-cpu-".length, -".so".length)))];
  return names.length ? names.join(",") : null;
}

async function runLlama(llama, file, threads) {
  const model = await llama.loadModel({modelPath: file});
  const ctx = await model.createContext({contextSize: promptLen + genLen + 16, batchSize: 512, threads});
  const seq = ctx.getSequence();
  const it = seq.evaluate(promptIds, {temperature: 0, yieldEogToken: true});
  let t0 = performance.now();
  await it.next();  // the prompt plus the first generated token's sampling
  const promptSeconds = (performance.now() - t0) / 1000;
  t0 = performance.now();
  for (let i = 1; i < genLen; i++) await it.next();
  const decodeSeconds = (performance.now() - t0) / 1000;
  await it.return();
  await ctx.dispose();
  await model.dispose();
  llamaLoaded ??= loadedLlamaCpuVariant();
  return {prompt: promptLen / promptSeconds, decode: (genLen - 1) / decodeSeconds};
}

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  const median = n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  return {min: +s[0].toFixed(2), median: +median.toFixed(2), max: +s[n - 1].toFixed(2)};
};

async function loadLlama() {
  if (!llamaCpu) return getReferenceLlama();
  const {getLlama, LlamaLogLevel} = await import(llamaCpuVariant(llamaCpu));
  return getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
}

const llama = withLlama ? await loadLlama() : null;
let daisyKernels = null, daisyChoices = null, daisyCpu = null;
const rows = [];
const bw = [];
for (const name of models) {
  const file = ensureModel(name);
  const bytes = bytesPerToken(file);
  for (const threads of threadCounts) {
    const d = {prompt: [], decode: []}, l = {prompt: [], decode: []}, o = {prompt: [], decode: []};
    const sides = ["daisy", ...(withLlama ? ["llama"] : []), ...(abBin ? ["ab"] : [])];
    for (let r = 0; r < rounds; r++) {
      bw.push(bandwidth());
      // Rotate which side goes first.
      const order = sides.map((_, i) => sides[(i + r) % sides.length]);
      let ids = null;
      for (const side of order) {
        const res = side === "daisy" ? runOurs(file, threads) : side === "ab" ? runOurs(file, threads, abBin)
                                                                               : await runLlama(llama, file, threads);
        if (res.ids && ids && JSON.stringify(res.ids) !== JSON.stringify(ids)) throw new Error(`${name}: the --ab build's ids differ`);
        if (res.ids) ids = res.ids;
        if (side === "daisy" && res.kernels) [daisyKernels, daisyChoices, daisyCpu] = [res.kernels, res.choices, res.cpu];
        const dst = side === "daisy" ? d : side === "ab" ? o : l;
        dst.prompt.push(res.prompt);
        dst.decode.push(res.decode);
        log(`${name} t=${threads} round ${r} ${side}: prompt ${res.prompt.toFixed(1)} tok/s, decode ${res.decode.toFixed(2)} tok/s`);
      }
    }
    const row = {model: name, threads, weight_bytes_per_token: bytes,
                 daisy: {prompt_tok_s: stats(d.prompt), decode_tok_s: stats(d.decode)}};
    row.daisy_decode_gb_s = +(bytes * row.daisy.decode_tok_s.median / 1e9).toFixed(2);
    if (withLlama) {
      row.llamacpp = {prompt_tok_s: stats(l.prompt), decode_tok_s: stats(l.decode)};
      row.ratio_prompt = +(row.daisy.prompt_tok_s.median / row.llamacpp.prompt_tok_s.median).toFixed(3);
      row.ratio_decode = +(row.daisy.decode_tok_s.median / row.llamacpp.decode_tok_s.median).toFixed(3);
      row.llamacpp_decode_gb_s = +(bytes * row.llamacpp.decode_tok_s.median / 1e9).toFixed(2);
    }
    if (abBin) {
      row.ab = {binary: abBin, prompt_tok_s: stats(o.prompt), decode_tok_s: stats(o.decode)};
      row.vs_ab_prompt = +(row.daisy.prompt_tok_s.median / row.ab.prompt_tok_s.median).toFixed(3);
      row.vs_ab_decode = +(row.daisy.decode_tok_s.median / row.ab.decode_tok_s.median).toFixed(3);
    }
    rows.push(row);
    log(JSON.stringify(row));
  }
}
const key = (k) => stats(bw.map(b => b[k]));
console.log(JSON.stringify({bench: "engine", prompt_tokens: promptLen, generated_tokens: genLen, rounds,
                            cpu: daisyCpu, daisy_kernels: daisyKernels, daisy_kernel_choices: daisyChoices,
                            llamacpp_cpu_variant: llamaLoaded ?? llamaCpu ?? "ggml's best for this CPU",
                            machine_read_gb_s: {one_thread: key("read_gb_s_1thread"), two_threads: key("read_gb_s_2threads")},
                            rows}));
