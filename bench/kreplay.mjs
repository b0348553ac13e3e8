// The adaptive K controller against fixed K on real greedy texts, without the machine's noise
// (daisy-bench-kreplay explains the method). For the target/draft pairs that
// bench/speculative.mjs generates (same names in --dir): records each prompt's text with one
// `daisy run --spec-k 12` on one node, measures the verify's time at K = 0 .. --time-ks (median
// of the runs' verify_ms; K = 0: a plain decode) and the draft's time per token once, on core 0,
// then replays at each --delays D: every verify (and plain decode) costs 2·D ms more, a round
// trip through 2 stages with D ms per hop. Prints one JSON object (last line). Traces recorded
// by a build that reports `draft_confidence` replay the adaptive rule with the draft's
// confidences (docs/speculative.md, "The draft's confidence"); older traces without them.
// Re-record (--reuse-traces 0) to replay with them.
//
// --verify-ms T0,T1,... and --draft-ms D replay with given costs instead of measuring them (the
// costs of another host, or of this one measured before); --reuse-traces 1 replays the texts
// recorded by an earlier run instead of recording them again.
//
//   node bench/kreplay.mjs [--shape 8b] [--scales 0.02,0.003] [--prompts 3] [--gen 64]
//                          [--delays 0,10,50,100] [--time-ks 6] [--seeds 20] [--dir /tmp/daisy-bench]
//                          [--verify-ms 332,367,392 --draft-ms 35] [--reuse-traces 1]
import fs from "node:fs";
import path from "node:path";
import {spawnSync} from "node:child_process";
import {daisyBinary, parseArgs} from "../tests/parity/lib.mjs";
import {benchPrompts, daisyRunner} from "./lib.mjs";

const args = parseArgs();
const bin = daisyBinary(args);
const replay = path.join(path.dirname(bin), "..", "bench", "daisy-bench-kreplay");
if (!fs.existsSync(replay)) throw new Error(`${replay} not found (build first)`);
const shape = args.shape ?? "8b";
const scales = (args.scales ?? "0.02,0.003").split(",");
const nPrompts = Math.max(1, Number(args.prompts ?? 3));
const genLen = Number(args.gen ?? 64);
const timeKs = Number(args["time-ks"] ?? 6);
const seeds = String(args.seeds ?? 20);
const delays = (args.delays ?? "0,10,50,100").split(",").map(Number);
const dir = args.dir ?? "/tmp/daisy-bench";
const log = (...a) => console.error("[kreplay]", ...a);
const {daisy} = daisyRunner(bin);
// The same prompts as bench/speculative.mjs --prompts N.
const prompts = benchPrompts(nPrompts);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const draft = path.join(dir, `${shape}-spec-draft1.gguf`);
const run = (model, extra, ids) =>
  daisy(["run", "-m", model, ...extra, "--ids", ids, "-n", String(genLen), "--ignore-eos", "--json", "-t", "1"], 0);

let verifyMs = args["verify-ms"] ? String(args["verify-ms"]).split(",").map(Number) : null;
let draftMs = args["draft-ms"] !== undefined ? Number(args["draft-ms"]) : null;
if ((verifyMs === null) !== (draftMs === null)) throw new Error("--verify-ms and --draft-ms go together");
const reuse = (args["reuse-traces"] ?? "0") !== "0";
const out = [];
for (const scale of scales) {
  const target = path.join(dir, `${shape}-spec-${scale}.gguf`);
  if (!fs.existsSync(target) || !fs.existsSync(draft)) throw new Error(`${target} or ${draft} missing: run bench/speculative.mjs first`);
  if (verifyMs === null) {
    // The target's cost per K does not depend on the pair's agreement: measured once.
    verifyMs = [1000 / run(target, [], prompts[0]).decode_tok_s];
    for (let k = 1; k <= timeKs; k++) {
      const j = run(target, ["--draft", draft, "--spec-k", String(k)], prompts[0]);
      verifyMs.push(median(j.speculative.verify_ms.slice(0, -1)));  // the last verify may have fewer drafts
      log(`K=${k}: verify ${verifyMs[k].toFixed(1)} ms`);
    }
    draftMs = 1000 / run(draft, [], prompts[0]).decode_tok_s;
    log(`plain ${verifyMs[0].toFixed(1)} ms, draft ${draftMs.toFixed(1)} ms a token`);
  }
  const traces = [];
  for (let p = 0; p < nPrompts; p++) {
    const f = path.join(dir, `${shape}-spec-${scale}-trace-p${p}-n${genLen}.json`);
    if (reuse && fs.existsSync(f)) {
      traces.push(f);
      continue;
    }
    const j = run(target, ["--draft", draft, "--spec-k", "12"], prompts[p]);
    fs.writeFileSync(f, JSON.stringify(j));
    log(`s=${scale} prompt ${p}: acceptance ${(100 * j.speculative.acceptance).toFixed(0)}% at K=12`);
    traces.push(f);
  }
  const byDelay = {};
  for (const d of delays) {
    const r = spawnSync(replay, ["--verify-ms", verifyMs.map((x) => (x + 2 * d).toFixed(2)).join(","), "--draft-ms",
                                 draftMs.toFixed(2), "--seeds", seeds, ...traces], {encoding: "utf8"});
    if (r.status !== 0) throw new Error(`daisy-bench-kreplay: ${r.stderr}`);
    const j = JSON.parse(r.stdout.trim().split("\n").pop());
    log(`s=${scale} ${d} ms a hop: cold ${j.cold_over_best.toFixed(3)}, warm ${j.warm_over_best.toFixed(3)}, profile ${j.profile_over_best.toFixed(3)} of the best fixed K (${j.best_fixed_k})`);
    byDelay[`${d}ms`] = j;
  }
  out.push({extra_scale: Number(scale), results: byDelay});
}
console.log(JSON.stringify({bench: "kreplay", shape, prompts: nPrompts, gen: genLen, verify_ms: verifyMs, draft_ms: draftMs, pairs: out}));
