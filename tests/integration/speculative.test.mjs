// Speculative decoding through the command line, with real processes on loopback: `daisy
// gen-model --draft-output` writes a target/draft pair; `daisy run --draft` and `--lookup` give
// the same greedy ids as plain decoding, whole and on a 2-stage pipeline; a draft with another
// vocabulary and bad flags are refused with the reason. Runs the binary named by $DAISY.
import assert from "node:assert/strict";
import {spawn, spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after, test} from "node:test";

const daisy = process.env.DAISY ?? "build/apps/daisy";
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "daisy-speculative-"));
const children = new Set();
after(() => {
  for (const c of children) c.kill("SIGKILL");
  fs.rmSync(dir, {recursive: true, force: true});
});

function run(args) {
  const r = spawnSync(daisy, args, {encoding: "utf8", maxBuffer: 1 << 28});
  return {code: r.status, out: r.stdout, err: r.stderr};
}
function must(args) {
  const r = run(args);
  assert.equal(r.code, 0, `daisy ${args.join(" ")}: ${r.err}`);
  const lines = r.out.trim().split("\n");
  return JSON.parse(lines[lines.length - 1]);
}
function startWorker(shard) {
  return new Promise((resolve, reject) => {
    const proc = spawn(daisy, ["worker", "--shard", shard, "--listen", "127.0.0.1:0", "-t", "1"]);
    children.add(proc);
    let out = "", err = "";
    proc.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) resolve({proc, port: JSON.parse(out.split("\n")[0]).port});
    });
    proc.stderr.on("data", (d) => (err += d));
    proc.on("exit", (code) => {
      children.delete(proc);
      reject(new Error(`worker exited ${code}: ${err}`));
    });
  });
}

const target = path.join(dir, "target.gguf"), draft = path.join(dir, "draft.gguf");
const pair = must(["gen-model", "--shape", "tiny", "--layers", "6", "--type", "q8_0", "--seed", "9", "-o", target,
                   "--draft-output", draft, "--draft-layers", "2", "--extra-scale", "0.15", "--json"]);
must(["compile", "-m", target, "--stages", "2", "-o", path.join(dir, "s2"), "--json"]);
const PROMPTS = ["The quick brown fox", "one two three one two three one two", "abcabcabcabc"];

test("gen-model writes a draft that shares the target's first layers", () => {
  assert.equal(pair.draft.path, draft);
  assert.equal(pair.draft.n_layers, 2);
  assert.equal(pair.n_layers, 6);
});

test("greedy speculative decoding gives exactly the plain ids, whole and on 2 stages", async () => {
  const worker = await startWorker(path.join(dir, "s2", "stage-1.daisy"));
  const where = [["-m", target], ["--shard", path.join(dir, "s2", "stage-0.daisy"), "--workers", `127.0.0.1:${worker.port}`]];
  let accepted = 0, drafted = 0;
  for (const p of PROMPTS) {
    const plain = must(["run", "-m", target, "-p", p, "-n", "64", "-t", "1", "--json"]);
    for (const w of where) {
      for (const spec of [["--draft", draft], ["--draft", draft, "--spec-k", "5"], ["--lookup"], ["--lookup", "--spec-k", "3"]]) {
        const r = must(["run", ...w, "-p", p, "-n", "64", "-t", "1", "--json", ...spec]);
        assert.deepEqual(r.ids, plain.ids, `${w[0]} ${spec.join(" ")} "${p}"`);
        assert.equal(r.text, plain.text);
        assert.equal(r.speculative.drafter, spec[0] === "--lookup" ? "lookup" : "model");
        assert.equal(r.speculative.decode_forwards + 1 <= 64, true);
        if (spec[0] === "--draft") {
          accepted += r.speculative.accepted;
          drafted += r.speculative.drafted;
        }
      }
    }
  }
  assert.ok(accepted > 0 && accepted < drafted, `some drafts accepted, some not (${accepted} of ${drafted})`);
  worker.proc.kill("SIGTERM");
});

test("a draft with another vocabulary and bad flags are refused with the reason", () => {
  const other = path.join(dir, "other.gguf");
  must(["gen-model", "--shape", "tiny", "--layers", "1", "--vocab", "400", "-o", other, "--json"]);
  let r = run(["run", "-m", target, "-p", "hi", "-n", "4", "--draft", other]);
  assert.equal(r.code, 1);
  assert.match(r.err, /--draft .*other\.gguf: its vocabulary has 400 tokens, the model's \d+: a draft must share the model's vocabulary/);
  r = run(["run", "-m", target, "-p", "hi", "-n", "4", "--draft", draft, "--lookup"]);
  assert.match(r.err, /give one of --draft and --lookup, not both/);
  r = run(["run", "-m", target, "-p", "hi", "-n", "4", "--lookup", "--spec-k-max", "0"]);
  assert.match(r.err, /--spec-k must be 0 \(adaptive\) or more, and --spec-k-max 1 to 64/);
  r = run(["run", "-m", target, "-p", "hi", "-n", "4", "--draft", path.join(dir, "missing.gguf")]);
  assert.equal(r.code, 1);
  assert.match(r.err, /--draft: .*missing\.gguf/);
  r = run(["gen-model", "--shape", "tiny", "--layers", "2", "-o", path.join(dir, "x.gguf"), "--draft-output",
           path.join(dir, "y.gguf"), "--draft-layers", "2"]);
  assert.match(r.err, /--draft-layers 2: the draft needs fewer layers than the model's 2/);
});
