// The distributed pipeline with real processes on loopback: `daisy compile`, `daisy worker`,
// `daisy run --shard … --workers …`. Greedy ids must equal the monolithic run bit for bit on an
// f32 wire; lossy wires stay within the bounds docs/protocol.md states; wrong shards, wrong keys,
// malformed frames and a killed worker get clear errors. Runs the binary named by $DAISY.
import assert from "node:assert/strict";
import {spawn} from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import {test} from "node:test";
import {addrs, daisy, harness, lastJson, stopWorkers as stop, waitForStderr} from "./lib.mjs";

const h = harness("pipeline");
const {dir, track, run, must, start, compile, startWorker, startWorkers, runInBackground} = h;
const makeModel = (name, type, seed, layers) =>
  h.makeModel(name, ["--layers", String(layers), "--type", type, "--seed", String(seed)]);

const prompts = ["1,2,3,4,5", "200,17,99,3,3,3,41,250,8,9,10,11,12", "7"];
const runArgs = (ids) => ["--ids", ids, "-n", "24", "--ignore-eos", "--json", "-t", "1", "-b", "4"];

for (const type of ["q8_0", "q4_0", "f16", "f32"]) {
  test(`${type}: 2-, 3- and 4-stage pipelines give the monolithic greedy ids`, async () => {
    const model = makeModel(`m-${type}`, type, 11, 8);
    const mono = prompts.map((p) => lastJson(must(["run", "-m", model, ...runArgs(p)]).out).ids);
    for (const stages of [2, 3, 4]) {
      const out = path.join(dir, `${type}-${stages}`);
      const c = compile(model, out, ["--stages", String(stages)]);
      assert.equal(c.shards.length, stages);
      const ws = await startWorkers(out, stages);
      try {
        prompts.forEach((p, i) => {
          const j = lastJson(must(["run", "--shard", path.join(out, "stage-0.daisy"), "--workers", addrs(ws), ...runArgs(p)]).out);
          assert.deepEqual(j.ids, mono[i], `${stages} stages, prompt ${i}`);
          assert.equal(j.stages, stages);
        });
      } finally {
        stop(ws);
      }
      // The same split in one process.
      const shards = Array.from({length: stages}, (_, s) => ["--shard", path.join(out, `stage-${s}.daisy`)]).flat();
      assert.deepEqual(lastJson(must(["run", ...shards, ...runArgs(prompts[1])]).out).ids, mono[1]);
    }
  });
}

// llama-quantize file types on the small shape (rows of whole 256-element super-blocks): the
// shards carry the packed integer layout and every stage computes the file's mix of types.
for (const type of ["q4_k_m", "q2_k", "iq4_xs", "q5_1"]) {
  test(`${type}: a 3-stage pipeline gives the monolithic greedy ids`, async () => {
    const model = h.makeModel(`m-${type}`, ["--shape", "small", "--layers", "6", "--type", type, "--seed", "13"]);
    const mono = prompts.map((p) => lastJson(must(["run", "-m", model, ...runArgs(p)]).out).ids);
    const out = path.join(dir, `${type}-3`);
    compile(model, out, ["--stages", "3"]);
    const ws = await startWorkers(out, 3);
    try {
      prompts.forEach((p, i) => {
        const j = lastJson(must(["run", "--shard", path.join(out, "stage-0.daisy"), "--workers", addrs(ws), ...runArgs(p)]).out);
        assert.deepEqual(j.ids, mono[i], `prompt ${i}`);
      });
    } finally {
      stop(ws);
    }
  });
}

// Model families beyond Llama (their own ops on every stage: biases, q/k norms, GELU,
// post-norms, windows): a 3-stage pipeline gives the monolithic greedy ids, and speculative
// decoding (a draft of the first layers, and lookup) gives the plain ids, whole and split.
const FAMILIES = {
  qwen2: ["--arch", "qwen2", "--type", "q8_0"],
  qwen3: ["--arch", "qwen3", "--head-dim", "64", "--type", "q4_k_m"],
  phi3: ["--arch", "phi3", "--type", "q4_k_m"],
  // LongRoPE from 30 positions: the prompts' contexts (prompt + 24) are 29, 37 and 25, so both
  // factor sets run, and speculation's extra KV room (K + 1 positions) must not switch the set.
  "phi3-longrope": ["--arch", "phi3", "--longrope", "30", "--type", "q4_k_m"],
  // 7 layers (the sixth global) over windows of 6 positions: prompts and outputs run past them.
  gemma3: ["--arch", "gemma3", "--sliding-window", "6", "--tied", "on", "--type", "q6_k"],
};
for (const [fam, gen] of Object.entries(FAMILIES)) {
  test(`${fam}: a 3-stage pipeline and speculative decoding give the monolithic greedy ids`, async () => {
    const model = path.join(dir, `fam-${fam}.gguf`), draft = path.join(dir, `fam-${fam}-draft.gguf`);
    must(["gen-model", "--shape", "small", "--layers", "7", ...gen, "--seed", "17", "-o", model,
          "--draft-output", draft, "--draft-layers", "2", "--extra-scale", "0.15"]);
    const mono = prompts.map((p) => lastJson(must(["run", "-m", model, ...runArgs(p)]).out).ids);
    const out = path.join(dir, `fam-${fam}-3`);
    compile(model, out, ["--stages", "3"]);
    const ws = await startWorkers(out, 3);
    try {
      prompts.forEach((p, i) => {
        const w = ["--shard", path.join(out, "stage-0.daisy"), "--workers", addrs(ws)];
        assert.deepEqual(lastJson(must(["run", ...w, ...runArgs(p)]).out).ids, mono[i], `prompt ${i}`);
        for (const spec of [["--draft", draft], ["--lookup"]]) {
          assert.deepEqual(lastJson(must(["run", ...w, ...runArgs(p), ...spec]).out).ids, mono[i],
                           `prompt ${i} on 3 stages with ${spec[0]}`);
        }
      });
    } finally {
      stop(ws);
    }
    const spec = lastJson(must(["run", "-m", model, ...runArgs(prompts[1]), "--draft", draft]).out);
    assert.deepEqual(spec.ids, mono[1], "whole model with a draft");
    assert.ok(spec.speculative.verifies > 0);
  });
}

test("lossy wires (bf16, f16, q8_0) stay within the documented bounds", async () => {
  const model = makeModel("m-wire", "q8_0", 12, 6);
  const out = path.join(dir, "wire");
  compile(model, out, ["--stages", "3"]);
  const ws = await startWorkers(out, 3);
  // docs/protocol.md: max |log-prob difference| of the chosen token over the common prefix.
  const bounds = {f16: 0.3, bf16: 0.3, q8_0: 0.3};
  try {
    for (const p of prompts) {
      const base = lastJson(must(["run", "--shard", path.join(out, "stage-0.daisy"), "--workers", addrs(ws), ...runArgs(p)]).out);
      for (const [wire, bound] of Object.entries(bounds)) {
        const j = lastJson(must(["run", "--shard", path.join(out, "stage-0.daisy"), "--workers", addrs(ws), "--wire", wire, ...runArgs(p)]).out);
        assert.equal(j.wire, wire);
        let common = 0;
        while (common < j.ids.length && j.ids[common] === base.ids[common]) common++;
        assert.ok(common >= 1, `${wire}: the first token differs`);
        for (let i = 0; i < common; i++) {
          const d = Math.abs(j.logprobs[i] - base.logprobs[i]);
          assert.ok(d <= bound, `${wire}: log-prob differs by ${d} at ${i} (bound ${bound})`);
        }
      }
    }
  } finally {
    stop(ws);
  }
});

test("wrong shards are refused with the reason", async () => {
  const a = makeModel("ra", "q8_0", 21, 6);
  const b = makeModel("rb", "q8_0", 22, 6);
  compile(a, path.join(dir, "ra"), ["--layers", "3,3"]);
  compile(b, path.join(dir, "rb"), ["--layers", "3,3"]);
  compile(a, path.join(dir, "ra24"), ["--layers", "2,4"]);
  compile(a, path.join(dir, "ra42"), ["--layers", "4,2"]);
  const s0 = path.join(dir, "ra", "stage-0.daisy");
  const cases = [
    [path.join(dir, "rb", "stage-1.daisy"), /belongs to another model/],
    [path.join(dir, "ra24", "stage-1.daisy"), /layers overlap at 2 \(the previous stage ends at layer 2\)/],
    [path.join(dir, "ra42", "stage-1.daisy"), /layers skip to 4 \(the previous stage ends at layer 2\)/],
    [path.join(dir, "ra", "stage-0.daisy"), /give the shards in stage order/],
  ];
  for (const [shard, why] of cases) {
    const [w] = [await startWorker(shard)];
    const r = run(["run", "--shard", s0, "--workers", `127.0.0.1:${w.port}`, "--ids", "1,2", "-n", "2"]);
    stop([w]);
    assert.notEqual(r.code, 0);
    assert.match(r.err, why);
  }
  // Another format version (1: shards of daisy before the model description): the worker
  // refuses to start.
  const copy = path.join(dir, "v1.daisy");
  const bytes = fs.readFileSync(path.join(dir, "ra", "stage-1.daisy"));
  const key = Buffer.from("daisy.shard.format_version");
  const at = bytes.indexOf(key) + key.length + 4;  // after the key and its value type
  assert.equal(bytes.readUInt32LE(at), 2);
  bytes.writeUInt32LE(1, at);
  fs.writeFileSync(copy, bytes);
  const r = run(["worker", "--shard", copy, "--listen", "127.0.0.1:0"]);
  assert.notEqual(r.code, 0);
  assert.match(r.err, /shard format version 1, this daisy reads version 2; recompile/);
  // A plain GGUF is not a shard.
  const plain = run(["worker", "--shard", a, "--listen", "127.0.0.1:0"]);
  assert.match(plain.err, /is not a daisy shard/);
});

test("a cluster key is required and checked; an open worker says so", async () => {
  const model = makeModel("k", "q4_0", 31, 4);
  const out = path.join(dir, "k");
  compile(model, out, ["--stages", "2"]);
  const keyFile = path.join(dir, "cluster.key"), wrongFile = path.join(dir, "wrong.key");
  fs.writeFileSync(keyFile, "a-cluster-key-of-enough-bytes\n");
  fs.writeFileSync(wrongFile, "another-key-of-enough-bytes!!\n");
  const ws = await startWorkers(out, 2, ["--key-file", keyFile]);
  const base = ["run", "--shard", path.join(out, "stage-0.daisy"), "--workers", addrs(ws), "--ids", "1,2,3", "-n", "4", "--json"];
  try {
    const none = run(base);
    assert.notEqual(none.code, 0);
    assert.match(none.err, /requires a cluster key/);
    const wrong = run([...base, "--key-file", wrongFile]);
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.err, /wrong cluster key/);
    const ok = run([...base, "--key-file", keyFile]);
    assert.equal(ok.code, 0, ok.err);
    assert.equal(lastJson(ok.out).ids.length, 4);
    await new Promise((r) => setTimeout(r, 300));  // let the workers' stderr arrive
    assert.match(ws[0].stderr(), /dropping 127\.0\.0\.1:\d+: .*wrong cluster key/);
  } finally {
    stop(ws);
  }
  const open = await startWorkers(out, 2);
  try {
    await new Promise((r) => setTimeout(r, 300));
    assert.match(open[0].stderr(), /runs open/);
    const refused = run(["run", "--shard", path.join(out, "stage-0.daisy"), "--workers", addrs(open), "--ids", "1", "-n", "1", "--key-file", keyFile]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.err, /runs without a cluster key/);
  } finally {
    stop(open);
  }
});

function sendRaw(port, bytes) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => s.write(bytes));
    let got = 0;
    s.on("data", (d) => (got += d.length));
    s.on("close", () => resolve(got));
    s.on("error", () => {});
    setTimeout(() => s.destroy(), 5000);
  });
}

test("malformed and oversized frames close that connection; the worker keeps serving", async () => {
  const model = makeModel("mal", "q8_0", 41, 4);
  const out = path.join(dir, "mal");
  compile(model, out, ["--stages", "2"]);
  const ws = await startWorkers(out, 2);
  try {
    const header = (type, len, version = 5) => {
      const b = Buffer.alloc(12);
      b.write("DSY1", 0, "latin1");
      b.writeUInt16LE(version, 4);
      b.writeUInt16LE(type, 6);
      b.writeUInt32LE(len, 8);
      return b;
    };
    const t0 = Date.now();
    await sendRaw(ws[0].port, Buffer.alloc(100, 0xab));               // not a frame
    await sendRaw(ws[0].port, header(2, 0x7fffffff));                  // a 2 GB auth frame
    await sendRaw(ws[0].port, header(2, 65, 1));                       // an older daisy
    // An open handshake, then a frame type that does not exist.
    await sendRaw(ws[0].port, Buffer.concat([header(2, 65), Buffer.alloc(65), header(999, 4), Buffer.alloc(4)]));
    assert.ok(Date.now() - t0 < 4000, "the worker must close bad connections promptly");
    const j = lastJson(must(["run", "--shard", path.join(out, "stage-0.daisy"), "--workers", addrs(ws), "--ids", "5,6,7", "-n", "5", "--json"]).out);
    assert.deepEqual(j.ids, lastJson(must(["run", "-m", model, "--ids", "5,6,7", "-n", "5", "--json"]).out).ids);
    await new Promise((r) => setTimeout(r, 300));  // let the workers' stderr arrive
    assert.match(ws[0].stderr(), /not a daisy frame/);
    assert.match(ws[0].stderr(), /exceeds the limit/);
    assert.match(ws[0].stderr(), /unexpected frame type 999/);
    assert.match(ws[0].stderr(), /protocol version 1, this daisy speaks 5/);
  } finally {
    stop(ws);
  }
});

test("workers may start after the coordinator (connect with retry)", async () => {
  const model = makeModel("late", "q4_0", 51, 4);
  const out = path.join(dir, "late");
  compile(model, out, ["--stages", "2"]);
  // A port free now for the worker to take later, below the ephemeral range: the coordinator's
  // retried connects take their own ports from that range, and one equal to the target would
  // connect to itself.
  const [ephemeral] = fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
  let port = 0;
  for (let tries = 0; !port && tries < 50; tries++) {
    const p = 10000 + Math.floor(Math.random() * Math.max(1, ephemeral - 10000));
    port = await new Promise((resolve) => {
      const probe = net.createServer().once("error", () => resolve(0));
      probe.listen(p, "127.0.0.1", () => probe.close(() => resolve(p)));
    });
  }
  assert.ok(port, "no free port below the ephemeral range");
  const coord = spawn(daisy, ["run", "--shard", path.join(out, "stage-0.daisy"), "--workers", `127.0.0.1:${port}`, "--ids", "1,2", "-n", "3", "--json", "--connect-timeout", "20"]);
  track(coord);
  let stdout = "";
  coord.stdout.on("data", (d) => (stdout += d));
  await new Promise((r) => setTimeout(r, 700));
  const w = await startWorker(path.join(out, "stage-1.daisy"), [], port);
  const code = await new Promise((r) => coord.on("exit", r));
  stop([w]);
  assert.equal(code, 0);
  assert.equal(lastJson(stdout).ids.length, 3);
});

test("a worker killed mid-generation fails the request quickly; it works again once back", async () => {
  const model = makeModel("kill", "q8_0", 61, 6);
  const out = path.join(dir, "kill");
  compile(model, out, ["--stages", "3"]);
  const ws = await startWorkers(out, 3);
  const coord = spawn(daisy, ["run", "--shard", path.join(out, "stage-0.daisy"), "--workers", addrs(ws), "--ids", "1,2,3", "-n", "40000", "--ignore-eos", "--json", "-t", "1"]);
  track(coord);
  let stderr = "";
  coord.stderr.on("data", (d) => (stderr += d));
  // Killed once generating: after the last worker joined the session (not a fixed wait, which a
  // loaded machine can outlast before the coordinator has even connected), and a little more.
  for (const t0 = Date.now(); !/session/.test(ws[1].stderr()); ) {
    assert.ok(Date.now() - t0 < 20000, `no session on the last worker: ${ws[1].stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 300));
  const killedAt = Date.now();
  ws[1].proc.kill("SIGKILL");
  const code = await new Promise((r) => coord.on("exit", r));
  const took = Date.now() - killedAt;
  assert.notEqual(code, 0, "the run should fail");
  assert.ok(took < 5000, `failed after ${took} ms`);
  assert.match(stderr, /daisy: error: the pipeline is down: .*(127\.0\.0\.1:\d+)/);
  // Back on the same port: the next request succeeds.
  const back = await startWorker(path.join(out, "stage-2.daisy"), [], ws[1].port);
  try {
    const j = lastJson(must(["run", "--shard", path.join(out, "stage-0.daisy"), "--workers", `127.0.0.1:${ws[0].port},127.0.0.1:${back.port}`, "--ids", "1,2,3", "-n", "6", "--json"]).out);
    assert.deepEqual(j.ids, lastJson(must(["run", "-m", model, "--ids", "1,2,3", "-n", "6", "--json"]).out).ids);
  } finally {
    stop([ws[0], back]);
  }
});

test("compile splits by memory and explains what does not fit", () => {
  const model = makeModel("mem", "q8_0", 71, 8);
  const j = compile(model, path.join(dir, "mem"), ["--memory", "600K,200K"]);
  assert.equal(j.shards.length, 2);
  assert.ok(j.shards[0].last_layer - j.shards[0].first_layer > j.shards[1].last_layer - j.shards[1].first_layer);
  const r = run(["compile", "-m", model, "-o", path.join(dir, "mem2"), "--memory", "100K,100K"]);
  assert.notEqual(r.code, 0);
  assert.match(r.err, /does not fit/);
  const bad = run(["compile", "-m", model, "-o", path.join(dir, "mem3"), "--layers", "3,3"]);
  assert.match(bad.err, /add up to 6 layers, the model has 8/);
});

// Starts `daisy worker --cluster FILE --stage N`; resolves at its ready line.
const startClusterWorker = (file, stage) => start(["worker", "--cluster", file, "--stage", String(stage), "-t", "1"]);

async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const {port} = s.address();
      s.close(() => resolve(port));
    });
  });
}

test("a cluster file describes the whole pipeline for the workers and the coordinator", async () => {
  const model = makeModel("m-cluster", "q8_0", 31, 6);
  const out = path.join(dir, "cluster");
  compile(model, out, ["--stages", "3"]);
  const key = path.join(out, "cluster.key");
  fs.writeFileSync(key, "a-cluster-key-of-some-length-0123456789\n");
  const [p1, p2] = [await freePort(), await freePort()];
  const file = path.join(out, "cluster.toml");
  // Relative paths are relative to the file.
  fs.writeFileSync(file, `key_file = "cluster.key"\nwire = "f32"\nconnect_timeout = 10\n\n` +
                         `[[stage]]\nshard = "stage-0.daisy"\n\n` +
                         `[[stage]]\nshard = "stage-1.daisy"\naddress = "127.0.0.1:${p1}"\n\n` +
                         `[[stage]]\nshard = "stage-2.daisy"\naddress = "127.0.0.1:${p2}"\n`);
  const w1 = await startClusterWorker(file, 1), w2 = await startClusterWorker(file, 2);
  try {
    assert.equal(w1.ready.port, p1);
    assert.equal(w2.ready.stage, 2);
    const mono = lastJson(must(["run", "-m", model, ...runArgs(prompts[1])]).out).ids;
    const j = lastJson(must(["run", "--cluster", file, ...runArgs(prompts[1])]).out);
    assert.deepEqual(j.ids, mono);
    assert.equal(j.stages, 3);
    // The key comes from the file: a coordinator with another key is refused.
    const other = path.join(out, "other.key");
    fs.writeFileSync(other, "another-cluster-key-of-some-length-xyz\n");
    const bad = run(["run", "--cluster", file, "--key-file", other, "--connect-timeout", "2", ...runArgs("1")]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.err, /wrong cluster key/);
  } finally {
    w1.proc.kill("SIGTERM");
    w2.proc.kill("SIGTERM");
  }
  // Mistakes in the file are named with the line.
  const broken = path.join(out, "broken.toml");
  fs.writeFileSync(broken, `[[stage]]\nshard = "stage-0.daisy"\nadress = "127.0.0.1:1"\n`);
  const r = run(["run", "--cluster", broken, ...runArgs("1")]);
  assert.notEqual(r.code, 0);
  assert.match(r.err, /broken\.toml:3: unknown key 'adress' in stage 0/);
  const both = run(["run", "--cluster", file, "-m", model, ...runArgs("1")]);
  assert.match(both.err, /--cluster lists the shards and workers: drop -m, --shard and --workers/);
  const coordStage = run(["worker", "--cluster", file, "--stage", "0"]);
  assert.match(coordStage.err, /stage 0 runs in the coordinator/);
});

test("a worker that stops answering (SIGSTOP) fails the run within --peer-timeout, named; it serves again once continued", async () => {
  const model = makeModel("stop", "q8_0", 61, 4);
  const out = path.join(dir, "stop");
  compile(model, out, ["--stages", "3"]);
  const ws = await startWorkers(out, 3);
  try {
    // A long generation, stopped in the middle: the last worker freezes with its socket open.
    const r = runInBackground(["run", "--shard", path.join(out, "stage-0.daisy"), "--workers", addrs(ws),
                               "--ids", "1,2,3", "-n", "4000", "--ignore-eos", "--json", "-t", "1", "--peer-timeout", "2"]);
    await waitForStderr(ws[1], /session [0-9a-f]+: .* -> coordinator/);
    await new Promise((res) => setTimeout(res, 200));
    const stopped = Date.now();
    ws[1].proc.kill("SIGSTOP");
    const res = await r.done;
    const after = (Date.now() - stopped) / 1000;
    assert.notEqual(res.code, 0, "the run must fail, not hang");
    assert.match(res.err, new RegExp(`worker 127\\.0\\.0\\.1:${ws[1].port} \\(stage 2\\): no answer for 2 s`));
    assert.ok(after < 2 + 6, `failed ${after.toFixed(1)} s after the stop (bound: 2 s of silence)`);
    ws[1].proc.kill("SIGCONT");
    // Continued, the worker takes a new session.
    const j = lastJson(must(["run", "--shard", path.join(out, "stage-0.daisy"), "--workers", addrs(ws), "--ids", "1,2,3", "-n", "5", "--json"]).out);
    assert.deepEqual(j.ids, lastJson(must(["run", "-m", model, "--ids", "1,2,3", "-n", "5", "--json"]).out).ids);
  } finally {
    stop(ws);
  }
});

test("a forward that does not finish fails within --forward-timeout, naming the stage that has not finished it", async () => {
  const model = makeModel("fwd", "q8_0", 62, 4);
  const out = path.join(dir, "fwd");
  compile(model, out, ["--stages", "2"]);
  const ws = await startWorkers(out, 2);
  try {
    // Silence alone is not judged here (--peer-timeout 0): only the forward's bound.
    const r = runInBackground(["run", "--shard", path.join(out, "stage-0.daisy"), "--workers", addrs(ws),
                               "--ids", "1,2,3", "-n", "4000", "--ignore-eos", "--json", "-t", "1",
                               "--peer-timeout", "0", "--forward-timeout", "2"]);
    await waitForStderr(ws[0], /session [0-9a-f]+: .* -> coordinator/);
    await new Promise((res) => setTimeout(res, 200));
    ws[0].proc.kill("SIGSTOP");
    const res = await r.done;
    assert.notEqual(res.code, 0);
    assert.match(res.err, new RegExp(`no result for forward \\d+ within 2 s: worker 127\\.0\\.0\\.1:${ws[0].port} \\(stage 1\\)`));
    assert.ok(res.seconds < 60);
  } finally {
    stop(ws);
  }
});
