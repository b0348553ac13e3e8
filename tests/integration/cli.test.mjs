// The command-line contract (design.md): outputs, --json last lines, and clear errors for bad
// input. Runs the daisy binary named by $DAISY.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {test} from "node:test";

const daisy = process.env.DAISY ?? "build/apps/daisy";
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "daisy-cli-"));
const model = path.join(dir, "tiny.gguf");

function run(args, input) {
  const r = spawnSync(daisy, args, {input, encoding: "utf8", maxBuffer: 1 << 28});
  return {code: r.status, out: r.stdout, err: r.stderr};
}
function lastJson(out) {
  const lines = out.trim().split("\n");
  return JSON.parse(lines[lines.length - 1]);
}

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
  const r = run(["gen-model", "--shape", "llama-3.1-70b", "--layers", "1", "--type", "q4_0", "-o", big, "--json"]);
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
  assert.match(r.out, /q4_0\s+16 tensors/);
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
    [["gen-model", "--type", "q5_1", "-o", path.join(dir, "x.gguf")], null, /--type must be one of/],
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

test.after(() => fs.rmSync(dir, {recursive: true, force: true}));
