// Differential test: daisy's tokenizer against llama.cpp's on the same GGUF, for every string
// of the corpus, with and without special-token parsing; and detokenize(tokenize(s)) == s.
//
//   node tests/parity/tokenizer_parity.mjs [--daisy build/apps/daisy] [--vocab llama3|llama3-default|llama2|qwen3|gemma3|deepseek_v3|phi3]
import fs from "node:fs";
import path from "node:path";
import {makeCorpus} from "./corpus.mjs";
import {daisyBinary, finish, getReferenceLlama, parseArgs, runDaisy, tempDir, tokenizerJson} from "./lib.mjs";

const VOCABS = {
  "llama3": {tokenizer: "llama3", pre: null},           // byte-level BPE, llama-bpe pre-tokenizer
  "llama3-default": {tokenizer: "llama3", pre: "default"},  // same vocabulary, "default" pre-tokenizer
  "llama3-smollm": {tokenizer: "llama3", pre: "smollm"},    // SmolLM's and StarCoder's pre-tokenizer
  "llama3-gpt2": {tokenizer: "llama3", pre: "gpt-2"},       // GPT-2's (OLMo, MPT, ...)
  "llama2": {tokenizer: "llama2", pre: null},           // SentencePiece with byte fallback
  "qwen3": {tokenizer: "qwen3", pre: null},             // byte-level BPE, qwen2 pre-tokenizer
  "gemma3": {tokenizer: "gemma3", pre: null},           // SentencePiece (no space prefix), 262k pieces
  "deepseek_v3": {tokenizer: "deepseek_v3", pre: null}, // byte-level BPE, deepseek-v3 pre-tokenizer
  // Phi-3: Llama 2's vocabulary with Phi-3's added tokens, in a model named Phi-3 (llama.cpp then
  // has every special token strip the whitespace after it).
  "phi3": {tokenizer: "llama2", pre: null, shape: ["--shape", "phi-3-mini", "--layers", "1", "--d-model", "64",
                                                  "--heads", "4", "--kv-heads", "4", "--d-ff", "128"]},
};

const args = parseArgs();
const bin = daisyBinary(args);
const vocabName = args.vocab ?? "llama3";
const vocab = VOCABS[vocabName];
if (!vocab) throw new Error(`unknown --vocab ${vocabName}`);

const dir = tempDir("tokparity");
const model = path.join(dir, `${vocabName}.gguf`);
const gen = ["gen-model", ...(vocab.shape ?? ["--shape", "tiny"]), "--type", "q4_0", "--tokenizer", tokenizerJson(vocab.tokenizer), "-o", model];
if (vocab.pre) gen.push("--pre", vocab.pre);
runDaisy(bin, gen);

const corpus = makeCorpus();
const llama = await getReferenceLlama();
const ref = await llama.loadModel({modelPath: model});

const mismatches = [];
const roundTripFailures = [];
let totalTokens = 0;
for (const special of [false, true]) {
  const flags = ["tokenize", "-m", model, "--json"].concat(special ? ["--special"] : []);
  const ours = JSON.parse(runDaisy(bin, flags, JSON.stringify(corpus)));
  if (ours.length !== corpus.length) throw new Error(`daisy returned ${ours.length} lists for ${corpus.length} strings`);
  for (let i = 0; i < corpus.length; i++) {
    const theirs = Array.from(ref.tokenize(corpus[i], special));
    totalTokens += theirs.length;
    if (JSON.stringify(theirs) !== JSON.stringify(ours[i])) {
      mismatches.push({special, index: i, text: corpus[i], daisy: ours[i], llamacpp: theirs});
    }
  }
  if (!special) {
    const decoded = JSON.parse(runDaisy(bin, ["detokenize", "-m", model, "--json"], JSON.stringify(ours)));
    for (let i = 0; i < corpus.length; i++) {
      if (decoded[i] !== corpus[i]) roundTripFailures.push({index: i, text: corpus[i], decoded: decoded[i]});
    }
  }
}

for (const m of mismatches.slice(0, 10)) {
  console.error(`MISMATCH special=${m.special} #${m.index} ${JSON.stringify(m.text).slice(0, 200)}\n  daisy:    ${JSON.stringify(m.daisy).slice(0, 300)}\n  llama.cpp:${JSON.stringify(m.llamacpp).slice(0, 300)}`);
}
for (const f of roundTripFailures.slice(0, 10)) {
  console.error(`ROUNDTRIP #${f.index} ${JSON.stringify(f.text).slice(0, 200)} -> ${JSON.stringify(f.decoded).slice(0, 200)}`);
}
fs.rmSync(dir, {recursive: true, force: true});
const ok = mismatches.length === 0 && roundTripFailures.length === 0;
console.log(`${corpus.length * 2 - mismatches.length} passed, ${mismatches.length} failed`);
finish({test: "tokenizer_parity", vocab: vocabName, strings: corpus.length, comparisons: corpus.length * 2,
        reference_tokens: totalTokens, mismatches: mismatches.length, roundtrip_failures: roundTripFailures.length}, ok);
