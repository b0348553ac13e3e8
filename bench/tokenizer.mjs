// Tokenizer speed, daisy vs llama.cpp, on the same GGUF (the real Llama 3 vocabulary) and the
// same 1 MB of English text, alternating the two sides. Prints one JSON object.
//
//   node bench/tokenizer.mjs [--daisy-bench build/bench/daisy-bench-tokenizer] [--rounds 5] [--mb 1]
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {englishText} from "./english.mjs";
import {daisyBinary, getReferenceLlama, parseArgs, repoRoot, runDaisy, tempDir, tokenizerJson} from "../tests/parity/lib.mjs";

const args = parseArgs();
const bin = daisyBinary(args);
const benchBin = args["daisy-bench"] ?? path.join(repoRoot, "build/bench/daisy-bench-tokenizer");
const rounds = Number(args.rounds ?? 5);
const bytes = Math.round(Number(args.mb ?? 1) * 1e6);

const dir = tempDir("tokbench");
const model = path.join(dir, "llama3.gguf");
runDaisy(bin, ["gen-model", "--shape", "tiny", "--type", "q4_0", "--tokenizer", tokenizerJson("llama3"), "-o", model]);
const text = englishText(bytes);
const textFile = path.join(dir, "english.txt");
fs.writeFileSync(textFile, text);

const llama = await getReferenceLlama();
const ref = await llama.loadModel({modelPath: model});
const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return {min: s[0], median: s[Math.floor(s.length / 2)], max: s[s.length - 1]};
};

const daisySeconds = [], llamaSeconds = [];
let daisyTokens = 0, llamaTokens = 0, llamaIds = null;
for (let r = 0; r < rounds; r++) {
  const out = spawnSync(benchBin, ["-m", model, "--text", textFile, "--reps", "1"], {encoding: "utf8"});
  if (out.status !== 0) throw new Error(out.stderr);
  const j = JSON.parse(out.stdout.trim().split("\n").pop());
  daisySeconds.push(j.min);
  daisyTokens = j.tokens;
  const t0 = process.hrtime.bigint();
  llamaIds = ref.tokenize(text);
  llamaSeconds.push(Number(process.hrtime.bigint() - t0) / 1e9);
  llamaTokens = llamaIds.length;
}
// Same ids on both sides (not only the same count).
const ours = JSON.parse(runDaisy(bin, ["tokenize", "-m", model, "--json"], JSON.stringify([text])))[0];
const identical = ours.length === llamaIds.length && ours.every((id, i) => id === llamaIds[i]);
fs.rmSync(dir, {recursive: true, force: true});

const d = stats(daisySeconds), l = stats(llamaSeconds);
console.log(JSON.stringify({
  bench: "tokenizer", vocab: "llama3 (128256 tokens, llama-bpe)", text_bytes: text.length, rounds,
  daisy: {tokens: daisyTokens, seconds: d, mb_per_s_median: bytes / 1e6 / d.median},
  llamacpp: {tokens: llamaTokens, seconds: l, mb_per_s_median: bytes / 1e6 / l.median},
  identical_ids: identical, speedup_median: l.median / d.median,
}));
