// Speculative decoding through the command line, with real processes on loopback: `daisy
// gen-model --draft-output` writes a target/draft pair; `daisy run --draft` and `--lookup` give
// the same greedy ids as plain decoding, whole and on a 2-stage pipeline; a draft with another
// vocabulary and bad flags are refused with the reason. Runs the binary named by $DAISY.
import assert from "node:assert/strict";
import path from "node:path";
import {test} from "node:test";
import {harness} from "./lib.mjs";

const {dir, run, mustJson: must, start, startWorker} = harness("speculative");
const startServer = (args) => start(["serve", ...args]);

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
        // Per verify: K chosen, drafts accepted (at most K), the forward's time; they add up.
        const {k_chosen: ks, accepted_per_verify: acc, verify_ms: ms} = r.speculative;
        // Every decode forward gave one token plus the drafts it accepted: the first token comes
        // from the prompt's forward, so a run that reached -n took exactly n - 1 - (accepted)
        // decode forwards (one that stopped at an end-of-generation token, at most that).
        const saved = acc.reduce((a, b) => a + b, 0);
        if (r.ids.length === 64) assert.equal(r.speculative.decode_forwards, 63 - saved, "forwards = tokens - 1 - accepted");
        else assert.ok(r.speculative.decode_forwards <= r.ids.length - 1 - saved);
        assert.equal(ks.length, r.speculative.verifies);
        assert.equal(acc.length, ks.length);
        assert.equal(ms.length, ks.length);
        assert.equal(ks.reduce((a, b) => a + b, 0), r.speculative.drafted);
        assert.equal(acc.reduce((a, b) => a + b, 0), r.speculative.accepted);
        acc.forEach((a, i) => assert.ok(a >= 0 && a <= ks[i] && ms[i] >= 0, `verify ${i}: ${a} of ${ks[i]} in ${ms[i]} ms`));
        if (spec.includes("--spec-k")) assert.ok(ks.every((k) => k <= Number(spec[spec.length - 1])));
        // The draft model's confidence in each draft (a probability); none from prompt lookup.
        const conf = r.speculative.draft_confidence;
        assert.equal(conf.length, ks.length);
        conf.forEach((c, i) => {
          assert.equal(c.length, spec[0] === "--draft" ? ks[i] : 0, `verify ${i}`);
          assert.ok(c.every((x) => x > 0 && x <= 1), `verify ${i}: ${c}`);
        });
        // A fixed K is never cut short by confidence.
        if (spec.includes("--spec-k") || spec[0] === "--lookup") assert.equal(r.speculative.confidence_stops, 0);
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

test("daisy serve --draft: concurrent requests get exactly their plain text; usage and metrics count drafts", async () => {
  const worker = await startWorker(path.join(dir, "s2", "stage-1.daisy"));
  const server = await startServer(["--shard", path.join(dir, "s2", "stage-0.daisy"), "--workers", `127.0.0.1:${worker.port}`,
                                    "--draft", draft, "--http", "127.0.0.1:0", "-t", "1", "--ctx", "256", "--max-seqs", "4"]);
  assert.equal(server.ready.speculative, "draft");
  const base = `http://127.0.0.1:${server.ready.port}`;
  const post = async (body) => {
    const r = await fetch(`${base}/v1/completions`, {method: "POST", headers: {"Content-Type": "application/json"},
                                                     body: JSON.stringify({model: server.ready.model, ...body})});
    return {status: r.status, json: await r.json()};
  };
  const jobs = PROMPTS.map((p, i) => ({prompt: p, max_tokens: 40 + 5 * i, temperature: 0, speculative: i !== 1}));
  const want = jobs.map((j) => must(["run", "-m", target, "-p", j.prompt, "-n", String(j.max_tokens), "-t", "1", "--json"]).text);
  const got = await Promise.all(jobs.map((j) => post(j)));
  let accepted = 0;
  for (let i = 0; i < jobs.length; i++) {
    assert.equal(got[i].status, 200);
    assert.equal(got[i].json.choices[0].text, want[i], `request ${i}`);
    const details = got[i].json.usage.completion_tokens_details;
    if (jobs[i].speculative) {
      assert.ok(details.accepted_prediction_tokens + details.rejected_prediction_tokens > 0);
      accepted += details.accepted_prediction_tokens;
      const spec = got[i].json.usage.speculative;  // daisy's per-request report
      assert.equal(spec.accepted, details.accepted_prediction_tokens);
      assert.equal(spec.drafted, details.accepted_prediction_tokens + details.rejected_prediction_tokens);
      assert.ok(spec.verifies > 0 && spec.verifies < jobs[i].max_tokens);
      assert.equal(spec.acceptance, spec.accepted / spec.drafted);
      assert.equal(spec.tokens_per_verify, (spec.accepted + spec.verifies) / spec.verifies);
      assert.equal(spec.k_mean, spec.drafted / spec.verifies);
      assert.ok(spec.k_last >= 1 && spec.k_last <= 12, `k_last ${spec.k_last}`);
    } else {
      assert.equal(details, undefined, "a request with speculative: false drafts nothing");
      assert.equal(got[i].json.usage.speculative, undefined);
    }
  }
  const metrics = await (await fetch(`${base}/metrics`)).text();
  const value = (name) => Number(metrics.split("\n").find((l) => l.startsWith(name + " ")).split(" ")[1]);
  assert.equal(value("daisy_speculative_accepted_tokens_total"), accepted);
  assert.ok(value("daisy_speculative_verifies_total") > 0);
  assert.ok(value("daisy_speculative_tokens_per_verify") > 1);
  assert.ok(value("daisy_speculative_k_mean") >= 1);
  const kStart = value("daisy_speculative_k_start");  // from the last verified request's controller
  assert.ok(Number.isInteger(kStart) && kStart >= 0 && kStart <= 12, `daisy_speculative_k_start ${kStart}`);
  const bad = await post({prompt: "x", speculative: "yes"});
  assert.equal(bad.status, 400);
  assert.match(bad.json.error.message, /'speculative' must be a boolean/);
  // A request's own fixed K: every verify drafts that many (but the last one or two, with fewer
  // tokens left), the text is still the plain one, and the K adaptive requests start from is
  // untouched.
  const ownK = kStart === 2 ? 3 : 2;
  const fixed = await post({prompt: PROMPTS[0], max_tokens: 40, temperature: 0, speculative_k: ownK});
  assert.equal(fixed.status, 200);
  assert.equal(fixed.json.choices[0].text, want[0]);
  const fs = fixed.json.usage.speculative;
  assert.ok(fs.k_mean <= ownK && fs.k_mean > ownK - 1 && fs.k_last <= ownK, JSON.stringify(fs));
  const after = await (await fetch(`${base}/metrics`)).text();
  assert.equal(Number(after.split("\n").find((l) => l.startsWith("daisy_speculative_k_start ")).split(" ")[1]), kStart);
  for (const k of [13, -1, 2.5, "2"]) {
    const r = await post({prompt: "x", speculative_k: k});
    assert.equal(r.status, 400, `speculative_k ${k}`);
    assert.equal(r.json.error.message, "'speculative_k' must be an integer from 0 (adaptive) to 12 (the server's --spec-k-max)");
    assert.equal(r.json.error.param, "speculative_k");
  }
  server.proc.kill("SIGTERM");
  worker.proc.kill("SIGTERM");
});

test("--spec-profile carries what the adaptive K learned to the next run; other pairs and bad files are handled", async () => {
  const fs = await import("node:fs");
  const profile = path.join(dir, "pair.profile.json");
  const p = PROMPTS[0];
  const plain = must(["run", "-m", target, "-p", p, "-n", "48", "-t", "1", "--json"]);
  const withProfile = (extra) => run(["run", "-m", target, "-p", p, "-n", "48", "-t", "1", "--json", ...extra, "--spec-profile", profile]);
  // The first run starts without a profile and writes one; the second starts from it. Both are exact.
  let r = withProfile(["--draft", draft]);
  assert.equal(r.code, 0, r.err);
  let j = JSON.parse(r.out.trim().split("\n").pop());
  assert.equal(j.speculative.profile, "new");
  assert.deepEqual(j.ids, plain.ids);
  assert.match(r.err, /--spec-profile .*pair\.profile\.json: no profile yet; this run learns the pair from the start and saves it/);
  const saved = JSON.parse(fs.readFileSync(profile, "utf8"));
  assert.equal(saved.format, "daisy-spec-profile");
  assert.equal(saved.version, 1);
  assert.match(saved.pair, /^model target\.gguf \(\d+ bytes\), draft draft\.gguf \(\d+ bytes\)$/);
  assert.equal(saved.k_max, 12);
  assert.equal(saved.fixed_k, 0);
  // What it learned: drafts tried per tenth of confidence, as many as the run's drafts judged.
  const tried = saved.confidence_tried.reduce((a, b) => a + b, 0);
  assert.ok(tried > 0 && tried <= j.speculative.drafted, `${tried} of ${j.speculative.drafted}`);
  saved.confidence_taken.forEach((t, i) => assert.ok(t <= saved.confidence_tried[i]));
  assert.ok(saved.verify_ms.filter((ms) => ms > 0).length >= 2, JSON.stringify(saved.verify_ms));
  assert.ok(saved.draft_ms > 0);
  r = withProfile(["--draft", draft]);
  assert.equal(r.code, 0, r.err);
  j = JSON.parse(r.out.trim().split("\n").pop());
  assert.equal(j.speculative.profile, "restored");
  assert.deepEqual(j.ids, plain.ids);
  assert.match(r.err, new RegExp(`starting from acceptance ${Math.round(100 * saved.acceptance)}%, K ${saved.k}`));
  assert.notDeepEqual(JSON.parse(fs.readFileSync(profile, "utf8")).confidence_tried, saved.confidence_tried);
  // Another drafter is another pair: a warning, a new start, and the profile replaced.
  r = withProfile(["--lookup"]);
  assert.equal(r.code, 0, r.err);
  assert.equal(JSON.parse(r.out.trim().split("\n").pop()).speculative.profile, "new");
  assert.match(r.err, /is for another pair \(model target\.gguf .*draft draft\.gguf .*; this run: model target\.gguf .*prompt lookup\): starting without it, and replacing it at the end/);
  assert.match(JSON.parse(fs.readFileSync(profile, "utf8")).pair, /prompt lookup$/);
  // Another K setting: the same.
  r = withProfile(["--lookup", "--spec-k-max", "6"]);
  assert.equal(r.code, 0, r.err);
  assert.match(r.err, /was saved with --spec-k 0 --spec-k-max 12: starting without it/);
  assert.equal(JSON.parse(fs.readFileSync(profile, "utf8")).k_max, 6);
  // A file that is not a profile is refused and left as it was.
  const notProfile = [["notes.txt", "my notes\n", /not JSON, so not a daisy speculative-decoding profile/],
                      ["other.json", '{"a": 1}\n', /not a daisy speculative-decoding profile \(no "format": "daisy-spec-profile"\)/],
                      ["neg.json", JSON.stringify({...saved, acceptance: -0.5}), /'acceptance' is missing or not a number of 0 or more/],
                      ["over.json", JSON.stringify({...saved, state_taken: [9, 9], state_tried: [1, 1]}), /'state_taken' exceeds 'state_tried'/],
                      ["bins.json", JSON.stringify({...saved, confidence_tried: [1, 2]}), /'confidence_tried' is missing or not a list of 10 numbers/],
                      ["version.json", JSON.stringify({...saved, version: 2}), /a profile of another version \(this daisy reads version 1\)/]];
  for (const [name, text, why] of notProfile) {
    const f = path.join(dir, name);
    fs.writeFileSync(f, text);
    r = run(["run", "-m", target, "-p", p, "-n", "4", "--draft", draft, "--spec-profile", f]);
    assert.equal(r.code, 1, name);
    assert.match(r.err, why, name);
    assert.match(r.err, /give another file, or delete this one to start a new profile/, name);
    assert.equal(fs.readFileSync(f, "utf8"), text, `${name} left as it was`);
  }
  const big = path.join(dir, "big.json");
  fs.writeFileSync(big, " ".repeat((1 << 20) + 1));
  r = run(["run", "-m", target, "-p", p, "-n", "4", "--draft", draft, "--spec-profile", big]);
  assert.match(r.err, /big\.json: 1048577 bytes, more than a profile's 1048576/);
  r = run(["run", "-m", target, "-p", p, "-n", "4", "--spec-profile", profile]);
  assert.equal(r.code, 1);
  assert.match(r.err, /--spec-profile needs --draft or --lookup/);
  // daisy serve keeps one too: saved when idle and at exit, read at the next start.
  const served = path.join(dir, "serve.profile.json");
  const serveArgs = ["-m", target, "--draft", draft, "--http", "127.0.0.1:0", "-t", "1", "--ctx", "256", "--spec-profile", served];
  let server = await startServer(serveArgs);
  const complete = async (s) => {
    const res = await fetch(`http://127.0.0.1:${s.ready.port}/v1/completions`, {method: "POST", headers: {"Content-Type": "application/json"},
                            body: JSON.stringify({model: s.ready.model, prompt: p, max_tokens: 48, temperature: 0})});
    assert.equal(res.status, 200);
    return (await res.json()).choices[0].text;
  };
  assert.equal(await complete(server), plain.text);
  const exited = new Promise((resolve) => server.proc.on("exit", resolve));
  server.proc.kill("SIGTERM");
  await exited;
  const fromServe = JSON.parse(fs.readFileSync(served, "utf8"));
  assert.match(fromServe.pair, /^model target\.gguf .*draft draft\.gguf/);
  assert.ok(fromServe.confidence_tried.reduce((a, b) => a + b, 0) > 0);
  server = await startServer(serveArgs);
  const metrics = await (await fetch(`http://127.0.0.1:${server.ready.port}/metrics`)).text();
  assert.equal(Number(metrics.split("\n").find((l) => l.startsWith("daisy_speculative_k_start ")).split(" ")[1]), fromServe.k);
  assert.match(server.stderr(), /starting from acceptance/);
  assert.equal(await complete(server), plain.text);
  server.proc.kill("SIGTERM");
});
