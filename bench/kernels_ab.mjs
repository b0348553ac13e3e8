// Two builds of daisy-bench-kernels side by side (a kernel change's before and after):
// alternating, --rounds times per batch size, matmul median ms per weight type and kernel table;
// prints min/median/max of each side and the ratio of medians, as one JSON object.
//   node bench/kernels_ab.mjs --a OLD/daisy-bench-kernels --b NEW/daisy-bench-kernels
//                             [--batches 1,4,6,7,8,9,16,64] [--rounds 3] [--types q4_0]
//                             [--kernels avx2,avx512 (default: every table this CPU has)]
import {spawnSync} from "node:child_process";
import {parseArgs} from "../tests/parity/lib.mjs";
import {stats} from "./lib.mjs";

const args = parseArgs();
const batches = (args.batches ?? "1,4,6,7,8,9,16,64").split(",").map(Number);
const rounds = Number(args.rounds ?? 3);
const types = args.types ?? "q4_0";
const run = (bin, batch) => {
  const argv = [bin, "--batch", String(batch), "--reps", "5", "--types", types,
                ...(args.kernels ? ["--kernels", args.kernels] : [])];
  const r = spawnSync("taskset", ["-c", "0", ...argv], {encoding: "utf8"});
  if (r.status !== 0) throw new Error(`${bin}: ${r.stderr}`);
  const j = JSON.parse(r.stdout.trim().split("\n").pop());
  return Object.fromEntries(j.results.map((x) => [`${x.type}/${x.kernels}`, x.median_ms]));
};
const out = {};
for (const batch of batches) {
  const t = {a: {}, b: {}};
  for (let r = 0; r < rounds; r++) {
    for (const side of r % 2 === 0 ? ["a", "b"] : ["b", "a"]) {
      for (const [k, ms] of Object.entries(run(args[side], batch))) (t[side][k] ??= []).push(ms);
    }
  }
  out[batch] = Object.fromEntries(Object.keys(t.a).map((k) => [k, {a_ms: stats(t.a[k]), b_ms: stats(t.b[k]),
                                                                   b_over_a: stats(t.b[k]).median / stats(t.a[k]).median}]));
  console.error(`[kernels-ab] batch ${batch}: ` + Object.entries(out[batch]).map(([k, x]) =>
    `${k} ${x.a_ms.median.toFixed(2)} -> ${x.b_ms.median.toFixed(2)} ms`).join(", "));
}
console.log(JSON.stringify({bench: "kernels_ab", a: args.a, b: args.b, rounds, types, batches: out}));
