// What each quantisation costs, measured as llama.cpp users measure it: an f32 model is
// quantised to every file type daisy computes (`daisy quantize`, which reports the RMSE against
// the f32 weights per tensor type), then each quant's next-token distributions are compared with
// the f32 model's over an English text (`daisy perplexity --kl-base`: mean KL divergence, top
// token agreement, perplexity ratio). Prints one JSON object (the last line); progress on stderr.
//
//   node bench/quant_quality.mjs [--shape small] [--layers 8] [--ctx 256] [--bytes 40000]
//                                [--types q8_0,q6_k,...] [--dir /tmp/daisy-quality]
//   node bench/quant_quality.mjs --model models/kjv/kjv-target-f32.gguf --text models/kjv/heldout.txt
// (--model: a real f32 model as the base instead of a generated one, scored on --text; the
// rows then also give each type's own perplexity, and f16 and bf16 join the types.)
import fs from "node:fs";
import path from "node:path";
import {englishText} from "./english.mjs";
import {daisyBinary, lastJsonLine, parseArgs, runDaisy} from "../tests/parity/lib.mjs";

const args = parseArgs();
const bin = daisyBinary(args);
const shape = args.shape ?? "small";
const layers = String(args.layers ?? 8);
const ctx = String(args.ctx ?? 256);
const dir = args.dir ?? "/tmp/daisy-quality";
const real = typeof args.model === "string";
const types = (args.types ?? `${real ? "f16,bf16," : ""}q8_0,q6_k,q5_k_m,q5_k_s,q5_1,q5_0,q4_k_m,q4_k_s,iq4_xs,iq4_nl,q4_1,q4_0,q3_k_l,q3_k_m,q3_k_s,q2_k`).split(",");
fs.mkdirSync(dir, {recursive: true});
const log = (...a) => console.error("[quality]", ...a);

const base = real ? String(args.model) : path.join(dir, `${shape}-${layers}-f32.gguf`);
if (!fs.existsSync(base)) {
  log(`generating ${base}`);
  runDaisy(bin, ["gen-model", "--shape", shape, "--layers", layers, "--type", "f32", "--seed", "1", "--logit-std", "4", "-o", base]);
}
const text = typeof args.text === "string" ? String(args.text) : path.join(dir, "text.txt");
if (typeof args.text !== "string") fs.writeFileSync(text, englishText(Number(args.bytes ?? 40000), 11));

const rows = [];
if (real) {
  const p = lastJsonLine(runDaisy(bin, ["perplexity", "-m", base, "-f", text, "-c", ctx, "--json"]));
  rows.push({type: "f32", bits_per_weight: 32, perplexity: p.ppl, scored: p.scored});
}
for (const type of types) {
  const file = path.join(dir, `${shape}-${layers}-${type}.gguf`);
  log(type);
  const q = lastJsonLine(runDaisy(bin, ["quantize", base, file, "--type", type, "--json"]));
  const p = lastJsonLine(runDaisy(bin, ["perplexity", "-m", file, "-f", text, "--kl-base", base, "-c", ctx, "--json"]));
  rows.push({type, bits_per_weight: +(8 * q.all.bytes / q.all.elements).toFixed(3),
             relative_rmse: +q.all.relative_rmse.toFixed(5),
             by_type: Object.fromEntries(Object.entries(q.by_type).map(([t, e]) => [t, {tensors: e.tensors, relative_rmse: +e.relative_rmse.toFixed(5)}])),
             kl_mean: +p.kl.mean.toFixed(6), kl_p99: +p.kl.p99.toFixed(5), same_top: +p.same_top.toFixed(4),
             ln_ppl_ratio: +p.ln_ppl_ratio.toFixed(5), scored: p.scored, ...(real ? {perplexity: p.ppl} : {})});
  fs.rmSync(file);
}
console.log(JSON.stringify({bench: "quant_quality", ...(real ? {model: base, text} : {shape, layers: Number(layers)}), ctx: Number(ctx),
                            base: "f32", rows}));
