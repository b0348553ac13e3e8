// Speculative decoding speed, side by side in one run (bench/README: alternate, repeat,
// min/median/max). For generated target/draft pairs at several agreement levels (gen-model
// --draft-output --extra-scale S), one user, greedy: decode tokens/s without speculation,
// with adaptive K, and with fixed K in --ks, on one node (target and draft on core 0) and on 2
// stages (coordinator + draft on core 0, worker on core 1) at each --delays ms per hop through
// `daisy proxy`; plus prompt lookup on repetitive text. Reports acceptance, tokens per verify
// and the K chosen. Prints one JSON object (last line).
//
//   node bench/speculative.mjs [--shape 1b] [--scales 0.05,0.1,0.2] [--draft-layers 1]
//                              [--delays 0,50] [--ks 2,4,8] [--rounds 2] [--gen 64]
//                              [--one-node 1] [--lookup 1] [--prompts 1] [--dir /tmp/daisy-bench]
// (--one-node 0 / --lookup 0 leave out the one-node runs / the prompt lookup runs; --draft 0
// leaves out the draft model's runs, for prompt lookup alone. Prompt lookup runs on one node and
// at every delay.)
// --prompts N: round r generates from prompt r mod N (every mode the same prompt within a
// round). One 64-token greedy text favours whichever fixed K happens to line up with where the
// draft and the target part ways; over several texts the best fixed K is the one a user could
// actually pick, and `mean` (total tokens over total time) compares the modes over all of them.
// --ab OLD_BINARY adds the mode "adaptive@ab": adaptive K from another build (its coordinator;
// the worker is this build's), in the same alternation, to compare two versions of the rule.
// --profile 1 adds the mode "adaptive+profile": adaptive K with --spec-profile, one profile file
// per pair and place (one node, each delay), made by one unmeasured run on a prompt outside the
// measured ones before the first round and updated by every run of the mode after: a user who
// has run the pair there before.
// --pair TARGET.gguf,DRAFT.gguf --texts FILE: a real pair (models/kjv) instead of generated ones
// (--scales is ignored), its prompts the first 24 words of the lines of FILE (text, with BOS).
// Prompt lookup then runs on the same texts.
import fs from "node:fs";
import path from "node:path";
import {daisyBinary, parseArgs} from "../tests/parity/lib.mjs";
import {benchPrompts, daisyRunner, stats} from "./lib.mjs";

const args = parseArgs();
const bin = daisyBinary(args);
const SHAPES = {"1b": "llama-3.2-1b", "3b": "llama-3.2-3b", "8b": "llama-3.1-8b"};
const shape = args.shape ?? "1b";
const scales = (args.scales ?? "0.05,0.1,0.2").split(",");
const draftLayers = String(args["draft-layers"] ?? 1);
const delays = (args.delays ?? "0,50").split(",").map(Number);
const ks = (args.ks ?? "2,4,8").split(",").map(Number);
const rounds = Number(args.rounds ?? 2);
const genLen = Number(args.gen ?? 64);
const dir = args.dir ?? "/tmp/daisy-bench";
const oneNode = (args["one-node"] ?? "1") !== "0";
const withLookup = (args.lookup ?? "1") !== "0";
const withDraft = (args.draft ?? "1") !== "0";
const withProfile = (args.profile ?? "0") !== "0";
const nPrompts = Math.max(1, Number(args.prompts ?? 1));
fs.mkdirSync(dir, {recursive: true});
const log = (...a) => console.error("[bench]", ...a);
const {daisy, background} = daisyRunner(bin);
const ab = args.ab ? daisyRunner(String(args.ab)) : null;

const pair = typeof args.pair === "string" ? args.pair.split(",") : null;
// A prompt is ["--ids", ids] or, for a real pair, ["-p", text].
const texts = typeof args.texts === "string"
  ? fs.readFileSync(String(args.texts), "utf8").split("\n").filter((l) => l.trim()).map((l) => l.split(" ").slice(0, 24).join(" "))
  : null;
const promptArgs = (i) => texts ? ["-p", texts[i % texts.length]] : ["--ids", benchPrompts(i + 1)[i]];
const prompts = Array.from({length: nPrompts}, (_, i) => promptArgs(i));
const prompt = prompts[0];
// Repetitive ids for prompt lookup: a 12-token pattern four times.
const repetitive = Array.from({length: 48}, (_, i) => ((i % 12) * 7919) % 120000 + 10).join(",");

async function benchPair(scale) {
  const target = pair ? pair[0] : path.join(dir, `${shape}-spec-${scale}.gguf`);
  const draft = pair ? pair[1] : path.join(dir, `${shape}-spec-draft${draftLayers}.gguf`);
  const shards = pair ? path.join(dir, `${path.basename(target, ".gguf")}-s2`) : path.join(dir, `${shape}-spec-${scale}-s2`);
  if (!pair && (!fs.existsSync(target) || !fs.existsSync(draft))) {
    log(`generating ${target} and ${draft}`);
    daisy(["gen-model", "--shape", SHAPES[shape], "--type", "q4_0", "--seed", "3", "-o", target, "--draft-output", draft,
           "--draft-layers", draftLayers, "--extra-scale", scale, "--json"]);
  }
  if (!fs.existsSync(path.join(shards, "stage-1.daisy"))) {
    log(`compiling ${target} into 2 stages`);
    daisy(["compile", "-m", target, "--stages", "2", "-o", shards, "--json"]);
  }
  const worker = await background(["worker", "--shard", path.join(shards, "stage-1.daisy"), "--listen", "127.0.0.1:0", "-t", "1"], 1);
  const where = oneNode ? {one_node: ["-m", target]} : {};
  const extra = [];
  for (const d of delays) {
    let port = worker.ready.port;
    if (d > 0) {
      const p = await background(["proxy", "--listen", "127.0.0.1:0", "--to", `127.0.0.1:${port}`, "--delay", String(d)], 1);
      extra.push(p);
      port = p.ready.port;
    }
    where[`two_stages_${d}ms`] = ["--shard", path.join(shards, "stage-0.daisy"), "--workers", `127.0.0.1:${port}`];
  }
  const modes = {plain: [], adaptive: ["--draft", draft]};
  for (const k of ks) modes[`k${k}`] = ["--draft", draft, "--spec-k", String(k)];
  if (ab) modes["adaptive@ab"] = ["--draft", draft];
  if (withProfile) modes["adaptive+profile"] = ["--draft", draft];
  const profileOf = (w) => path.join(dir, `${shape}-spec-${scale}-profile-${w}.json`);
  const runs = {};
  const runOnce = (w, m, ids = prompt) =>
    (m.endsWith("@ab") ? ab.daisy : daisy)(["run", ...where[w], ...modes[m], ...(m.endsWith("+profile") ? ["--spec-profile", profileOf(w)] : []),
                                             ...ids, "-n", String(genLen), "--ignore-eos", "--json", "-t", "1"], 0);
  for (const w of Object.keys(where)) {
    runs[w] = {};
    for (const m of Object.keys(modes)) runs[w][m] = {tok_s: [], seconds: 0, acceptance: [], tokens_per_forward: [], k_chosen: []};
    runOnce(w, "plain");  // warm-up
    if (withProfile) {
      fs.rmSync(profileOf(w), {force: true});
      runOnce(w, "adaptive+profile", promptArgs(nPrompts));
    }
  }
  for (let r = 0; r < (withDraft ? rounds : 0); r++) {
    for (const w of Object.keys(where)) {
      const ms = Object.keys(modes);
      if (r % 2 === 1) ms.reverse();
      for (const m of ms) {
        const j = runOnce(w, m, prompts[r % nPrompts]);
        const x = runs[w][m];
        x.tok_s.push(j.decode_tok_s);
        x.seconds += (genLen - 1) / j.decode_tok_s;
        if (j.speculative) {
          x.acceptance.push(j.speculative.acceptance);
          x.tokens_per_forward.push(j.speculative.tokens_per_forward);
          x.k_chosen.push(j.speculative.k_chosen);
        }
        log(`s=${scale} round ${r + 1} ${w} ${m}: ${j.decode_tok_s.toFixed(2)} tok/s` +
            (j.speculative ? `, acceptance ${(100 * j.speculative.acceptance).toFixed(0)}%, ${j.speculative.tokens_per_forward.toFixed(2)} tok/forward` : ""));
      }
    }
  }
  // Prompt lookup on repetitive ids, on one node and at every delay; plain and lookup alternate.
  const lookup = {};
  for (const w of withLookup ? Object.keys(where) : []) {
    const plain = [], look = [];
    let last = null;
    const one = (spec) => daisy(["run", ...where[w], ...spec, ...(texts ? prompt : ["--ids", repetitive]), "-n", String(genLen),
                                 "--ignore-eos", "--json", "-t", "1"], 0);
    for (let r = 0; r < rounds; r++) {
      for (const m of r % 2 === 0 ? ["plain", "lookup"] : ["lookup", "plain"]) {
        if (m === "plain") {
          plain.push(one([]).decode_tok_s);
        } else {
          last = one(["--lookup"]);
          look.push(last.decode_tok_s);
        }
      }
      log(`lookup ${w} round ${r + 1}: plain ${plain[r].toFixed(2)}, lookup ${look[r].toFixed(2)} tok/s, acceptance ${(100 * last.speculative.acceptance).toFixed(0)}%`);
    }
    lookup[w] = {plain_tok_s: stats(plain), lookup_tok_s: stats(look), speedup_median: stats(look).median / stats(plain).median,
                 acceptance: last.speculative.acceptance, tokens_per_forward: last.speculative.tokens_per_forward,
                 k_chosen: last.speculative.k_chosen.slice(0, 16)};
  }
  worker.proc.kill("SIGTERM");
  for (const p of extra) p.proc.kill("SIGTERM");
  const summary = {};
  for (const [w, byMode] of withDraft ? Object.entries(runs) : []) {
    summary[w] = {};
    const plain = stats(byMode.plain.tok_s).median;
    for (const [m, x] of Object.entries(byMode)) {
      summary[w][m] = {tok_s: stats(x.tok_s), speedup_median: stats(x.tok_s).median / plain,
                       mean_tok_s: (genLen - 1) * x.tok_s.length / x.seconds};
      if (x.acceptance.length) {
        summary[w][m].acceptance = stats(x.acceptance).median;
        summary[w][m].tokens_per_forward = stats(x.tokens_per_forward).median;
        summary[w][m].k_chosen = x.k_chosen[x.k_chosen.length - 1];
      }
    }
  }
  return {extra_scale: pair ? null : Number(scale), draft_layers: pair ? null : Number(draftLayers), results: summary, lookup};
}

const out = [];
for (const s of pair ? ["real"] : scales) out.push(await benchPair(s));
console.log(JSON.stringify({bench: "speculative", shape: pair ? pair.join(",") : SHAPES[shape], rounds, prompts: nPrompts, gen: genLen, delays_ms: delays, pairs: out}));
process.exit(0);
