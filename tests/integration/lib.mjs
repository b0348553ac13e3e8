// What every test that drives daisy as a process shares (the integration tests here, and the
// differential tests and benchmarks through ../parity/lib.mjs): the daisy binary ($DAISY, else
// build/apps/daisy), a scratch directory and the processes a test file starts (removed and
// killed when the file's tests end), running daisy to completion within a bound, starting
// long-running daisy commands (worker, serve, proxy) that print a JSON ready line, and the
// fixtures the tests build from them: models, shards, workers.
import assert from "node:assert/strict";
import {spawn, spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after} from "node:test";

export const daisy = process.env.DAISY ?? "build/apps/daisy";
// What AddressSanitizer, LeakSanitizer, ThreadSanitizer and UBSan print (CI runs the integration
// tests on a sanitizer build too).
const SANITIZER_REPORT = /ERROR: (Address|Leak|Thread|Memory)Sanitizer|WARNING: ThreadSanitizer|runtime error: /;

// The last line of `out` as JSON (`--json` prints its report last).
export function lastJson(out) {
  const lines = out.trim().split("\n");
  return JSON.parse(lines[lines.length - 1]);
}

// One test file's harness; `name` names its scratch directory (daisy-<name>-XXXXXX).
export function harness(name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `daisy-${name}-`));
  const children = new Set();
  const logs = [];  // every process's stderr, scanned for sanitizer reports at the end
  after(async () => {
    // SIGTERM first, so a sanitizer build's leak check runs at exit; SIGKILL what is left.
    for (const c of children) c.kill("SIGTERM");
    const t0 = Date.now();
    while (children.size > 0 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 50));
    for (const c of children) c.kill("SIGKILL");
    fs.rmSync(dir, {recursive: true, force: true});
    const report = logs.map((l) => l()).find((e) => SANITIZER_REPORT.test(e));
    if (report) {
      const at = report.search(SANITIZER_REPORT);
      throw new Error(`a daisy process reported a sanitizer error:\n${report.slice(Math.max(0, at - 200), at + 3000)}`);
    }
  });
  // Kills `proc` at the end unless it has exited by then.
  const track = (proc) => {
    children.add(proc);
    proc.on("exit", () => children.delete(proc));
    return proc;
  };
  // Runs daisy to completion, for at most `timeout` ms (then it is killed and the result says
  // so): a command that should fail but serves instead must not hang the suite.
  const run = (args, input, timeout = 300000, env = {}) => {
    const r = spawnSync(daisy, args, {input, encoding: "utf8", maxBuffer: 1 << 28, timeout, killSignal: "SIGKILL",
                                      env: {...process.env, ...env}});
    const err = r.error?.code === "ETIMEDOUT" ? `${r.stderr}\n[killed after ${timeout} ms]` : r.stderr;
    logs.push(() => r.stderr ?? "");
    return {code: r.status, out: r.stdout, err};
  };
  const must = (args) => {
    const r = run(args);
    assert.equal(r.code, 0, `daisy ${args.join(" ")}: ${r.err}`);
    return r;
  };
  // Starts `daisy <args>`; resolves at its first (ready) line with {proc, ready, port, stderr()}
  // and rejects if it exits before.
  const start = (args) => new Promise((resolve, reject) => {
    const proc = track(spawn(daisy, args));
    let out = "", err = "";
    proc.stdout.on("data", (d) => {
      out += d;
      if (!out.includes("\n")) return;
      const ready = JSON.parse(out.split("\n")[0]);
      resolve({proc, ready, port: ready.port, stderr: () => err});
    });
    proc.stderr.on("data", (d) => (err += d));
    logs.push(() => err);
    proc.on("exit", (code) => reject(new Error(`daisy ${args.join(" ")} exited ${code}: ${err}`)));
  });
  // Runs `daisy <args>` in the background; `done` resolves at its exit with {code, out, err, seconds}.
  const runInBackground = (args) => {
    const proc = track(spawn(daisy, args));
    let out = "", err = "";
    proc.stdout.on("data", (d) => (out += d));
    proc.stderr.on("data", (d) => (err += d));
    logs.push(() => err);
    const t0 = Date.now();
    const done = new Promise((resolve) => proc.on("exit", (code) => resolve({code, out, err, seconds: (Date.now() - t0) / 1000})));
    return {proc, done};
  };
  // A generated model in the scratch directory: `daisy gen-model` with `flags` (shape tiny
  // unless they say another).
  const makeModel = (name, flags = []) => {
    const p = path.join(dir, `${name}.gguf`);
    must(["gen-model", ...(flags.includes("--shape") ? [] : ["--shape", "tiny"]), ...flags, "-o", p]);
    return p;
  };
  // `daisy compile`; returns its JSON report.
  const compile = (model, out, args) => lastJson(must(["compile", "-m", model, "-o", out, ...args, "--json"]).out);
  // A worker on loopback (any free port unless given), one thread.
  const startWorker = (shard, extra = [], port = 0) =>
    start(["worker", "--shard", shard, "--listen", `127.0.0.1:${port}`, "-t", "1", ...extra]);
  // Workers for stages 1 .. stages-1 of a compiled directory.
  const startWorkers = async (shardDir, stages, extra = []) => {
    const ws = [];
    for (let s = 1; s < stages; s++) ws.push(await startWorker(path.join(shardDir, `stage-${s}.daisy`), extra));
    return ws;
  };
  return {dir, track, run, must, mustJson: (args) => lastJson(must(args).out), start, runInBackground, makeModel,
          compile, startWorker, startWorkers};
}

// Stops workers (SIGTERM, and SIGCONT first in case a test stopped one).
export function stopWorkers(ws) {
  for (const w of ws) {
    w.proc.kill("SIGCONT");
    w.proc.kill("SIGTERM");
  }
}

// "127.0.0.1:P1,127.0.0.1:P2" for --workers.
export const addrs = (ws) => ws.map((w) => `127.0.0.1:${w.port}`).join(",");

// Resolves once `w`'s stderr matches `re` (polling), or rejects after `ms`.
export async function waitForStderr(w, re, ms = 20000) {
  const t0 = Date.now();
  while (!re.test(w.stderr())) {
    if (Date.now() - t0 > ms) throw new Error(`no ${re} in the process's stderr: ${w.stderr()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
