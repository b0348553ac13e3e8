// Load time, daisy vs llama.cpp (node-llama-cpp 3.21.1), same GGUF files and thread counts,
// alternating the sides round by round. daisy: `run --json`'s load_seconds (reading the file,
// checking it, laying the weights out for its kernels, making the pipeline), and the whole
// process's wall time for a one-token run (an --ab build without load_seconds has only that);
// llama.cpp: loadModel plus a 64-position context. Both read the file from the page cache after
// the first round.
// Prints one JSON object (the last line); progress goes to stderr.
//
//   node bench/load.mjs [--models 1b-q4_k_m,8b-q4_k_m] [--threads 2] [--rounds 3]
//                       [--dir /tmp/daisy-bench] [--ab OLD_DAISY] [--no-llama]
import fs from "node:fs";
import path from "node:path";
import {daisyBinary, getReferenceLlama, parseArgs, runDaisy, lastJsonLine} from "../tests/parity/lib.mjs";
import {stats} from "./lib.mjs";

const args = parseArgs();
const bin = daisyBinary(args);
const models = (args.models ?? "1b-q4_k_m,8b-q4_k_m").split(",");
const threads = Number(args.threads ?? 2);
const rounds = Number(args.rounds ?? 3);
const dir = args.dir ?? "/tmp/daisy-bench";
const abBin = args.ab;
const withLlama = !args["no-llama"];
const log = (...a) => console.error("[bench]", ...a);

function file(name) {
  const f = path.join(dir, `${name}.gguf`);
  if (!fs.existsSync(f)) throw new Error(`${f} is missing: make it with bench/engine.mjs --models ${name}`);
  return f;
}

// {load, wall} seconds (load: null from a build that does not report it).
function daisyLoad(which, f) {
  const t0 = performance.now();
  const j = lastJsonLine(runDaisy(which, ["run", "-m", f, "--ids", "1", "-n", "1", "--threads", String(threads), "--json"]));
  return {load: j.load_seconds ?? null, wall: (performance.now() - t0) / 1000};
}

async function llamaLoad(llama, f) {
  const t0 = performance.now();
  const model = await llama.loadModel({modelPath: f});
  const ctx = await model.createContext({contextSize: 64, threads});
  const seconds = (performance.now() - t0) / 1000;
  await ctx.dispose();
  await model.dispose();
  return seconds;
}

const llama = withLlama ? await getReferenceLlama() : null;
const rows = [];
for (const name of models) {
  const f = file(name);
  const sides = ["daisy", ...(withLlama ? ["llama"] : []), ...(abBin ? ["ab"] : [])];
  const got = Object.fromEntries(sides.map((s) => [s, []]));
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < sides.length; i++) {
      const side = sides[(i + r) % sides.length];
      const s = side === "daisy" ? daisyLoad(bin, f) : side === "ab" ? daisyLoad(abBin, f) : {load: await llamaLoad(llama, f)};
      got[side].push(s);
      log(`${name} round ${r} ${side}: load ${s.load?.toFixed(2) ?? "-"} s${s.wall ? `, process ${s.wall.toFixed(2)} s` : ""}`);
    }
  }
  const row = {model: name, threads, bytes: fs.statSync(f).size};
  for (const side of sides) {
    const key = side === "llama" ? "llamacpp" : side;
    const loads = got[side].map((s) => s.load).filter((x) => x !== null);
    row[key] = {load_seconds: loads.length ? stats(loads) : null};
    if (side !== "llama") row[key].process_seconds = stats(got[side].map((s) => s.wall));
  }
  rows.push(row);
  log(JSON.stringify(row));
}
console.log(JSON.stringify({bench: "load", threads, rounds, rows}));
