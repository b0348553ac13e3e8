// daisy perplexity against the same windows computed with llama.cpp: the text tokenised with
// BOS first, cut into chunks of --ctx with each chunk's first token replaced by BOS, and the
// second half of every chunk scored (llama-perplexity's scheme). llama.cpp evaluates each chunk
// from an empty sequence and gives its next-token probabilities; the mean negative
// log-likelihood must agree with daisy's within TOL[type] (as engine_parity's log-probability
// tolerances, averaged) for an f32 and a q4_k_m model, and KL(f32 || q4_k_m) computed from
// llama.cpp's distributions must agree with daisy's --kl-base within 10% + 0.002 (measured:
// 0.0485 against 0.0484).
//
//   node tests/parity/perplexity_parity.mjs [--daisy build/apps/daisy]
import fs from "node:fs";
import path from "node:path";
import {englishText} from "../../bench/english.mjs";
import {daisyBinary, finish, getReferenceLlama, LLAMA_THREADS, lastJsonLine, parseArgs, runDaisy, tempDir} from "./lib.mjs";

const args = parseArgs();
const bin = daisyBinary(args);
const dir = tempDir("perplexity");
const llama = await getReferenceLlama();
const CTX = 96;
const TOL = {f32: 0.005, q4_k_m: 0.03};  // |mean NLL difference| in nats (measured 2026-12-05: 0.00004, 0.0054)

// Per chunk, llama.cpp's full next-token distributions (as log-probabilities) at positions
// CTX/2 .. CTX-2.
async function llamaWindows(file, tokens, bos) {
  const model = await llama.loadModel({modelPath: file});
  const ctx = await model.createContext({contextSize: CTX + 8, threads: LLAMA_THREADS});
  const chunks = [];
  for (let c = 0; (c + 1) * CTX <= tokens.length; c++) {
    const chunk = tokens.slice(c * CTX, (c + 1) * CTX);
    chunk[0] = bos;
    const seq = ctx.getSequence();
    const it = seq.evaluateWithMetadata([chunk[0]], {probabilities: true}, {temperature: 0, yieldEogToken: true});
    let r = await it.next();
    const rows = [];
    for (let j = 0; j < CTX - 1; j++) {
      if (j >= CTX / 2) rows.push({next: chunk[j + 1], lp: new Map([...r.value.probabilities.entries()].map(([t, p]) => [t, Math.log(p)]))});
      r = await it.next(chunk[j + 1]);
    }
    await it.return();
    seq.dispose();
    chunks.push(rows);
  }
  await ctx.dispose();
  await model.dispose();
  return chunks;
}

const results = [];
let passed = 0, failed = 0;
const check = (ok, what) => {
  if (ok) passed++;
  else {
    failed++;
    console.error(`FAIL: ${what}`);
  }
};

const base = path.join(dir, "f32.gguf"), quant = path.join(dir, "q4_k_m.gguf"), text = path.join(dir, "text.txt");
runDaisy(bin, ["gen-model", "--shape", "small", "--layers", "2", "--type", "f32", "--seed", "21", "--logit-std", "3", "-o", base]);
runDaisy(bin, ["quantize", base, quant, "--type", "q4_k_m"]);
const words = englishText(700, 5);
fs.writeFileSync(text, words);
const meta = JSON.parse(runDaisy(bin, ["inspect", base, "--json"])).metadata;
const bos = Number(meta["tokenizer.ggml.bos_token_id"]);
const tokens = [bos, ...JSON.parse(runDaisy(bin, ["tokenize", "-m", base, "--json"], JSON.stringify([words])))[0]];
const windows = {};
for (const [type, file] of [["f32", base], ["q4_k_m", quant]]) {
  const ours = lastJsonLine(runDaisy(bin, ["perplexity", "-m", file, "-f", text, "-c", String(CTX), "--json"]));
  windows[type] = await llamaWindows(file, tokens, bos);
  const rows = windows[type].flat();
  const nll = rows.reduce((a, r) => a - r.lp.get(r.next), 0) / rows.length;
  check(ours.tokens === tokens.length, `${type}: daisy read ${ours.tokens} tokens, the tokenizer gives ${tokens.length}`);
  check(ours.scored === rows.length, `${type}: daisy scored ${ours.scored} tokens, llama.cpp's windows ${rows.length}`);
  const diff = Math.abs(ours.nll - nll);
  check(diff <= TOL[type], `${type}: mean NLL daisy ${ours.nll} llama.cpp ${nll} (diff ${diff}, tolerance ${TOL[type]})`);
  results.push({type, chunks: ours.chunks, scored: ours.scored, daisy_ppl: ours.ppl, llamacpp_ppl: Math.exp(nll), nll_diff: diff});
}
// KL(f32 || q4_k_m) from llama.cpp's two sets of distributions, against daisy --kl-base.
const ours = lastJsonLine(runDaisy(bin, ["perplexity", "-m", quant, "-f", text, "--kl-base", base, "-c", String(CTX), "--json"]));
const p = windows.f32.flat(), q = windows.q4_k_m.flat();
let kl = 0;
for (let i = 0; i < p.length; i++) {
  let k = 0;
  for (const [t, lp] of p[i].lp) k += Math.exp(lp) * (lp - (q[i].lp.get(t) ?? -Infinity));
  kl += k;
}
kl /= p.length;
check(Math.abs(ours.kl.mean - kl) <= 0.1 * kl + 0.002, `KL daisy ${ours.kl.mean} llama.cpp ${kl}`);
results.push({kl_daisy: ours.kl.mean, kl_llamacpp: kl, same_top_daisy: ours.same_top});
fs.rmSync(dir, {recursive: true, force: true});
console.log(`${passed} passed, ${failed} failed`);
finish({test: "perplexity_parity", passed, failed, results}, failed === 0);
