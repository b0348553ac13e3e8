// The command-line contract (design.md): outputs, --json last lines, and clear errors for bad
// input. Runs the daisy binary named by $DAISY.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {test} from "node:test";
import {harness, lastJson} from "./lib.mjs";

const {dir, run} = harness("cli");
const model = path.join(dir, "tiny.gguf");

test("gen-model writes a model and reports it as JSON", () => {
  const r = run(["gen-model", "--shape", "tiny", "--type", "q4_0", "--seed", "3", "-o", model, "--json"]);
  assert.equal(r.code, 0, r.err);
  const j = lastJson(r.out);
  assert.equal(j.path, model);
  assert.equal(j.bytes, fs.statSync(model).size);
  assert.equal(j.n_layers, 2);
  assert.equal(j.type, "q4_0");
});

test("gen-model is deterministic for a seed", () => {
  const other = path.join(dir, "again.gguf");
  assert.equal(run(["gen-model", "--shape", "tiny", "--type", "q4_0", "--seed", "3", "-o", other]).code, 0);
  assert.deepEqual(fs.readFileSync(other), fs.readFileSync(model));
});

test("gen-model streams: the 70B shape's widest layer needs little memory", () => {
  const big = path.join(dir, "wide.gguf");
  const r = run(["gen-model", "--shape", "llama-3.1-70b", "--layers", "1", "--type", "q4_0", "--pure", "-o", big, "--json"]);
  assert.equal(r.code, 0, r.err);
  const j = lastJson(r.out);
  assert.ok(j.bytes > 1.5e9, `expected a >1.5 GB file, got ${j.bytes}`);
  assert.ok(j.peak_rss_bytes < 200e6, `peak RSS ${j.peak_rss_bytes} bytes`);
  assert.match(r.err, /gen-model: .* \(100%\)/);  // progress on long runs
  fs.rmSync(big);
});

test("inspect shows metadata, tensors, bytes per type and the total", () => {
  const r = run(["inspect", model]);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /general\.architecture\s+string\s+"llama"/);
  assert.match(r.out, /tokenizer\.ggml\.tokens\s+array\[string; \d+\]\s+\[.*more\]/);
  assert.match(r.out, /blk\.1\.ffn_down\.weight\s+q4_0\s+192 x 64/);
  // llama-quantize's Q4_0 file type: the head gets q6_K, and q8_0 when q6_K's 256-element
  // block does not divide its rows (64 here).
  assert.match(r.out, /output\.weight\s+q8_0\s+64 x \d+/);
  assert.match(r.out, /q4_0\s+15 tensors/);
  assert.match(r.out, /total: 21 tensors/);
  const j = lastJson(run(["inspect", model, "--json"]).out);
  assert.equal(j.n_tensors, 21);
  assert.equal(j.bytes_per_type.f32.tensors, 5);
  assert.equal(j.tensors.reduce((a, t) => a + t.bytes, 0), j.tensor_bytes);
});

test("tokenize and detokenize follow the JSON contract", () => {
  const texts = ["Hello world", "", "<|eot_id|>"];
  const plain = JSON.parse(run(["tokenize", "-m", model, "--json"], JSON.stringify(texts)).out);
  assert.equal(plain.length, 3);
  assert.deepEqual(plain[1], []);
  assert.ok(plain[2].length > 1, "special text is plain text without --special");
  const special = JSON.parse(run(["tokenize", "-m", model, "--json", "--special"], JSON.stringify(texts)).out);
  assert.equal(special[2].length, 1);
  const back = JSON.parse(run(["detokenize", "-m", model, "--json"], JSON.stringify(plain)).out);
  assert.deepEqual(back, texts);
});

test("errors are clear and exit non-zero", () => {
  const cases = [
    [["inspect", path.join(dir, "nope.gguf")], null, /no such file/],
    [["gen-model", "--shape", "huge", "-o", path.join(dir, "x.gguf")], null, /unknown shape 'huge'/],
    [["gen-model", "--type", "q7_k", "-o", path.join(dir, "x.gguf")], null, /--type must be one of .*q4_k_m.*got .q7_k./],
    [["gen-model", "-o", path.join(dir, "no/such/dir/x.gguf")], null, /cannot create/],
    [["tokenize", "-m", model, "--json"], "not json", /not valid JSON/],
    [["tokenize", "-m", model, "--json"], "[\"a\", 3]", /element 1 of the input list is not a string/],
    [["detokenize", "-m", model, "--json"], "[[1, 99999999]]", /not a token id below/],
  ];
  for (const [args, input, pattern] of cases) {
    const r = run(args, input ?? "");
    assert.notEqual(r.code, 0, `${args.join(" ")} succeeded`);
    assert.match(r.err, pattern);
  }
  assert.ok(!fs.existsSync(path.join(dir, "x.gguf")), "a failed gen-model leaves no file");
});

test("a truncated or corrupt model is refused with the offset", () => {
  const bytes = fs.readFileSync(model);
  const cut = path.join(dir, "cut.gguf");
  fs.writeFileSync(cut, bytes.subarray(0, 5000));
  let r = run(["inspect", cut]);
  assert.equal(r.code, 1);
  assert.match(r.err, /cut\.gguf: .*truncated.*offset \d+/);
  const bad = Buffer.from(bytes);
  bad.writeBigUInt64LE(1n << 60n, 8);  // tensor count
  fs.writeFileSync(cut, bad);
  r = run(["tokenize", "-m", cut, "--json"], "[]");
  assert.equal(r.code, 1);
  assert.match(r.err, /tensor count 1152921504606846976 cannot fit/);
});

test("run generates, streams, reports speeds, and is reproducible", () => {
  const greedy = run(["run", "-m", model, "--ids", "72,101,108", "-n", "12", "--ignore-eos", "--json"]);
  assert.equal(greedy.code, 0, greedy.err);
  const g = lastJson(greedy.out);
  assert.equal(g.ids.length, 12);
  assert.equal(g.prompt_tokens, 3);
  assert.ok(g.prompt_tok_s > 0 && g.decode_tok_s > 0);
  // Each decode forward's time: the prompt's forward gives the first token, one forward each
  // the other 11.
  assert.equal(g.decode_forward_ms.length, 11, JSON.stringify(g.decode_forward_ms));
  assert.ok(g.decode_forward_ms.every((ms) => ms >= 0), JSON.stringify(g.decode_forward_ms));
  // The host a speed was measured on: the kernel table and the CPU's model name.
  assert.ok(["scalar", "avx2", "avx512", "amx"].includes(g.kernels), g.kernels);
  const cpuinfo = fs.existsSync("/proc/cpuinfo") ? fs.readFileSync("/proc/cpuinfo", "utf8") : "";
  const cpuName = /^model name\s*:\s*(.*)$/m.exec(cpuinfo);
  // /proc/cpuinfo's name, and in parentheses the cpuid brand string where a virtual machine's
  // differs, then the x86 family and model as /proc/cpuinfo gives them.
  const cpuFamily = /^cpu family\s*:\s*(\d+)$/m.exec(cpuinfo), cpuModel = /^model\s*:\s*(\d+)$/m.exec(cpuinfo);
  if (cpuName && cpuFamily && cpuModel) {
    const os = cpuName[1].trim(), fm = `family ${cpuFamily[1]} model ${cpuModel[1]})`;
    assert.ok(g.cpu === `${os} (${fm}` || (g.cpu.startsWith(`${os} (cpuid: `) && g.cpu.endsWith(`; ${fm}`)), g.cpu);
  } else if (cpuName) {
    const os = cpuName[1].trim();
    assert.ok(g.cpu === os || (g.cpu.startsWith(`${os} (cpuid: `) && g.cpu.endsWith(")")), g.cpu);
  } else assert.ok(typeof g.cpu === "string" && g.cpu.length > 0, g.cpu);
  // The table's run-time choices: bf16 products through vdpbf16ps exactly where the AVX-512
  // table runs on a CPU with AVX512-BF16, unless DAISY_BF16_DOTS=0 says no.
  assert.ok(Array.isArray(g.kernel_choices), JSON.stringify(g));
  const bf16Cpu = /^flags\s*:.*\bavx512_bf16\b/m.test(cpuinfo);
  assert.equal(g.kernel_choices.includes("bf16-dots"), bf16Cpu && ["avx512", "amx"].includes(g.kernels),
               JSON.stringify(g.kernel_choices));
  const noDots = run(["run", "-m", model, "--ids", "72,101,108", "-n", "2", "--json"], undefined, 300000,
                     {DAISY_BF16_DOTS: "0"});
  assert.equal(noDots.code, 0, noDots.err);
  assert.ok(!lastJson(noDots.out).kernel_choices.includes("bf16-dots"), noDots.out);
  assert.deepEqual(lastJson(run(["run", "-m", model, "--ids", "72", "-n", "1", "--kernels", "scalar", "--json"]).out)
                       .kernel_choices, []);
  assert.match(greedy.err, /prompt 3 tokens, [\d.]+ tok\/s; generated 12 tokens/);
  // The same greedy ids with every kernel table and thread count (within one table the bits
  // are batch- and thread-invariant; across tables only near-ties could differ, and this
  // model has none in these 12 steps).
  for (const extra of [["--threads", "1"], ["--kernels", "scalar"], ["--batch", "1"]]) {
    const r = lastJson(run(["run", "-m", model, "--ids", "72,101,108", "-n", "12", "--ignore-eos", "--json", ...extra]).out);
    assert.deepEqual(r.ids, g.ids, extra.join(" "));
  }
  // Text mode streams the decoded text to stdout.
  const text = run(["run", "-m", model, "-p", "Hello", "-n", "8", "--ignore-eos"]);
  assert.equal(text.code, 0, text.err);
  const again = lastJson(run(["run", "-m", model, "-p", "Hello", "-n", "8", "--ignore-eos", "--json"]).out);
  assert.equal(text.out, again.text + "\n");
  // Sampling: same seed, same tokens; another seed, other tokens.
  const sample = (seed) => lastJson(run(["run", "-m", model, "--ids", "72,101", "-n", "24", "--ignore-eos",
                                          "--temp", "1.5", "--top-k", "0", "--top-p", "1", "--min-p", "0",
                                          "--seed", String(seed), "--json"]).out).ids;
  assert.deepEqual(sample(5), sample(5));
  assert.notDeepEqual(sample(5), sample(6));
});

test("run refuses bad input clearly", () => {
  const cases = [
    [["run", "-m", model, "--ids", "1,99999999", "-n", "2"], /--ids: '99999999' is not a token id below/],
    [["run", "-m", model, "--ids", "1,x", "-n", "2"], /--ids: 'x' is not a token id/],
    [["run", "-m", model, "-p", "a", "--ids", "1", "-n", "2"], /give exactly one of -p and --ids/],
    [["run", "-m", model, "-n", "2"], /give exactly one of -p and --ids/],
    [["run", "-m", path.join(dir, "none.gguf"), "-p", "a"], /no such file/],
    [["run", "-m", model, "--ids", "1", "--kernels", "sse9"], /--kernels sse9 is not supported/],
    [["score", "-m", model, "--ids", "", "--json"], /give exactly one of -p and --ids/],
  ];
  for (const [args, pattern] of cases) {
    const r = run(args);
    assert.notEqual(r.code, 0, args.join(" "));
    assert.match(r.err, pattern, args.join(" "));
  }
});

test("score lists log-probabilities that are a distribution", () => {
  const r = run(["score", "-m", model, "--ids", "72,101,108,108,111", "--top", "4", "--json"]);
  assert.equal(r.code, 0, r.err);
  const j = lastJson(r.out);
  assert.equal(j.positions.length, 5);
  for (const p of j.positions) {
    assert.equal(p.top.length, 4);
    const mass = p.top.reduce((a, [, lp]) => a + Math.exp(lp), 0);
    assert.ok(mass > 0 && mass <= 1 + 1e-9);
    for (let i = 1; i < 4; i++) assert.ok(p.top[i][1] <= p.top[i - 1][1]);
  }
  assert.equal(j.positions[0].next, 101);
  assert.equal(j.positions[4].next, -1);
});


test("quantize writes a llama-quantize file type and reports its error per type", () => {
  const f32 = path.join(dir, "q-f32.gguf");
  assert.equal(run(["gen-model", "--shape", "small", "--layers", "2", "--type", "f32", "--seed", "4", "-o", f32]).code, 0);
  const out = path.join(dir, "q-q4km.gguf");
  const r = run(["quantize", f32, out, "--type", "Q4_K_M", "--json"]);
  assert.equal(r.code, 0, r.err);
  const j = lastJson(r.out);
  assert.equal(j.type, "q4_k_m");
  assert.equal(j.file_type, 15);
  assert.equal(j.output_bytes, fs.statSync(out).size);
  assert.deepEqual(Object.keys(j.by_type).sort(), ["q4_K", "q6_K"]);
  assert.equal(j.by_type.q4_K.bits_per_weight, 4.5);
  assert.ok(j.by_type.q4_K.relative_rmse > j.by_type.q6_K.relative_rmse, JSON.stringify(j.by_type));
  // The file runs, and is what gen-model writes for the same weights.
  const direct = path.join(dir, "q-direct.gguf");
  assert.equal(run(["gen-model", "--shape", "small", "--layers", "2", "--type", "q4_k_m", "--seed", "4", "-o", direct]).code, 0);
  const ids = (m) => lastJson(run(["run", "-m", m, "--ids", "5,6,7", "-n", "6", "--ignore-eos", "--json"]).out).ids;
  assert.deepEqual(ids(out), ids(direct));
  const info = lastJson(run(["inspect", out, "--json"]).out);
  assert.equal(Number(info.metadata["general.file_type"]), 15);
  // Clear refusals.
  const cases = [
    [["quantize", f32, path.join(dir, "x.gguf"), "--type", "q9_k"], /--type must be one of .*q4_k_m/],
    [["quantize", f32, f32, "--type", "q8_0"], /would overwrite the input/],
    [["quantize", out, path.join(dir, "x.gguf"), "--type", "q2_k"], /is q4_K; quantize from an f32, f16, bf16 or q8_0 file/],
    [["quantize", path.join(dir, "none.gguf"), path.join(dir, "x.gguf"), "--type", "q8_0"], /no such file/],
  ];
  for (const [args, pattern] of cases) {
    const e = run(args);
    assert.notEqual(e.code, 0, args.join(" "));
    assert.match(e.err, pattern, args.join(" "));
  }
  assert.ok(!fs.existsSync(path.join(dir, "x.gguf")) && !fs.existsSync(path.join(dir, "x.gguf.partial")));
});

test("quantize streams: a 650 MB model in little memory, progress on stderr", () => {
  const f16 = path.join(dir, "q-big16.gguf");
  assert.equal(run(["gen-model", "--shape", "llama-3.2-1b", "--layers", "1", "--type", "f16", "-o", f16]).code, 0);
  const out = path.join(dir, "q-big8.gguf");
  const r = run(["quantize", f16, out, "--type", "q8_0", "--json"]);
  assert.equal(r.code, 0, r.err);
  const j = lastJson(r.out);
  assert.ok(j.input_bytes > 600e6);
  assert.ok(j.peak_rss_bytes < 150e6, `peak RSS ${j.peak_rss_bytes} bytes`);
  assert.match(r.err, /quantize: .* \(100%\)/);
  fs.rmSync(f16);
  fs.rmSync(out);
});

test("perplexity reports perplexity, and KL divergence and top-token agreement against a base", () => {
  const base = path.join(dir, "p-f32.gguf"), q = path.join(dir, "p-q6.gguf"), text = path.join(dir, "p.txt");
  assert.equal(run(["gen-model", "--shape", "small", "--layers", "2", "--type", "f32", "--seed", "6", "-o", base]).code, 0);
  assert.equal(run(["quantize", base, q, "--type", "q6_k"]).code, 0);
  const words = "The quick brown fox jumps over the lazy dog. ".repeat(12);
  fs.writeFileSync(text, words);
  const n = JSON.parse(run(["tokenize", "-m", q, "--json"], JSON.stringify([words])).out)[0].length + 1;  // + BOS
  const r = run(["perplexity", "-m", q, "-f", text, "--kl-base", base, "-c", "128", "--json"]);
  assert.equal(r.code, 0, r.err);
  const j = lastJson(r.out);
  assert.equal(j.tokens, n);
  assert.equal(j.chunks, Math.floor(n / 128));
  assert.ok(j.chunks >= 2);
  assert.equal(j.scored, j.chunks * 63);
  assert.ok(j.ppl > 1 && Number.isFinite(j.ppl));
  assert.ok(j.kl.mean > 0 && j.kl.mean < 1, JSON.stringify(j.kl));
  assert.ok(j.same_top > 0.5 && j.same_top <= 1);
  assert.match(r.err, new RegExp(`perplexity: chunk ${j.chunks}: ppl [\\d.]+, mean KL`));
  // The base against itself: no divergence.
  const self = lastJson(run(["perplexity", "-m", base, "-f", text, "--kl-base", base, "-c", "128", "--json"]).out);
  assert.equal(self.kl.mean, 0);
  assert.equal(self.same_top, 1);
  const cases = [
    [["perplexity", "-m", q, "-f", text, "-c", "512"], /the text has \d+ tokens; perplexity with a context of 512 needs at least 1024/],
    [["perplexity", "-m", q, "-f", path.join(dir, "none.txt")], /none\.txt: no such file/],
    [["perplexity", "-m", q, "-f", text, "-c", "2"], /--ctx must be at least 4/],
  ];
  for (const [args, pattern] of cases) {
    const e = run(args);
    assert.notEqual(e.code, 0, args.join(" "));
    assert.match(e.err, pattern, args.join(" "));
  }
});
