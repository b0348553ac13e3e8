// What the integration tests share: the daisy binary ($DAISY, else build/apps/daisy), a scratch
// directory and the processes a test file starts (removed and killed when the file's tests end),
// running daisy to completion, and starting long-running daisy commands (worker, serve, proxy)
// that print a JSON ready line.
import assert from "node:assert/strict";
import {spawn, spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {after} from "node:test";

export const daisy = process.env.DAISY ?? "build/apps/daisy";

// The last line of `out` as JSON (`--json` prints its report last).
export function lastJson(out) {
  const lines = out.trim().split("\n");
  return JSON.parse(lines[lines.length - 1]);
}

// One test file's harness; `name` names its scratch directory (daisy-<name>-XXXXXX).
export function harness(name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `daisy-${name}-`));
  const children = new Set();
  after(() => {
    for (const c of children) c.kill("SIGKILL");
    fs.rmSync(dir, {recursive: true, force: true});
  });
  // Kills `proc` at the end unless it has exited by then.
  const track = (proc) => {
    children.add(proc);
    proc.on("exit", () => children.delete(proc));
    return proc;
  };
  // Runs daisy to completion, for at most `timeout` ms (then it is killed and the result says
  // so): a command that should fail but serves instead must not hang the suite.
  const run = (args, input, timeout = 300000) => {
    const r = spawnSync(daisy, args, {input, encoding: "utf8", maxBuffer: 1 << 28, timeout, killSignal: "SIGKILL"});
    const err = r.error?.code === "ETIMEDOUT" ? `${r.stderr}\n[killed after ${timeout} ms]` : r.stderr;
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
    proc.on("exit", (code) => reject(new Error(`daisy ${args.join(" ")} exited ${code}: ${err}`)));
  });
  return {dir, track, run, must, mustJson: (args) => lastJson(must(args).out), start};
}
