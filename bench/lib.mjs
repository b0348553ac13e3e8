// What the benchmarks share: running daisy (pinned to a core with taskset when asked), starting
// long-running daisy processes that print a ready line, and min/median/max of repeated runs.
import {spawn, spawnSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {lastJsonLine, repoRoot} from "../tests/parity/lib.mjs";

// Runners for the binary `bin`; every background process is killed when node exits.
export function daisyRunner(bin) {
  const children = new Set();
  process.on("exit", () => children.forEach((c) => c.kill("SIGKILL")));
  const command = (argv, core) => (core === undefined ? [bin, ...argv] : ["taskset", "-c", String(core), bin, ...argv]);
  return {
    // Runs to completion; returns its last JSON line.
    daisy(argv, core) {
      const cmd = command(argv, core);
      const r = spawnSync(cmd[0], cmd.slice(1), {encoding: "utf8", maxBuffer: 1 << 28});
      if (r.status !== 0) throw new Error(`${cmd.join(" ")}: ${r.stderr}`);
      return lastJsonLine(r.stdout);
    },
    // Starts on `core`; resolves with {proc, ready} at its first (ready) line.
    background(argv, core) {
      return new Promise((resolve, reject) => {
        const cmd = command(argv, core);
        const proc = spawn(cmd[0], cmd.slice(1));
        children.add(proc);
        let out = "", err = "";
        proc.stdout.on("data", (d) => {
          out += d;
          if (out.includes("\n")) resolve({proc, ready: JSON.parse(out.split("\n")[0])});
        });
        proc.stderr.on("data", (d) => (err += d));
        proc.on("exit", (code) => reject(new Error(`${argv.join(" ")} exited ${code}: ${err}`)));
      });
    },
  };
}

// min / median (the upper middle for an even count) / max, and the runs themselves.
export function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return {min: s[0], median: s[Math.floor(s.length / 2)], max: s[s.length - 1], runs: xs};
}

// The speculative benchmarks' prompts: n different 16-token id lists (comma-separated).
export function benchPrompts(n) {
  return Array.from({length: n}, (_, p) => Array.from({length: 16}, (_, i) => (i * 7919 + p * 104729) % 120000 + 10).join(","));
}

// The link benchmarks' model (made once in `dir`): 2 layers with the 8B's width (4096: 16 KiB of
// f32 activations per row per hop), q8_0, compiled into 2 stages. Returns the two shard paths.
export function hopShards(daisy, dir) {
  const file = path.join(dir, "hop-4096.gguf");
  if (!fs.existsSync(file)) {
    daisy(["gen-model", "--shape", "tiny", "--layers", "2", "--d-model", "4096", "--heads", "32", "--kv-heads", "8",
           "--d-ff", "1024", "--type", "q8_0", "-o", file, "--json"]);
  }
  const shards = path.join(dir, "hop-4096-s2");
  if (!fs.existsSync(path.join(shards, "stage-1.daisy"))) daisy(["compile", "-m", file, "--stages", "2", "-o", shards, "--json"]);
  return [path.join(shards, "stage-0.daisy"), path.join(shards, "stage-1.daisy")];
}

// llama.cpp restricted to one of ggml's CPU variants (`haswell`: AVX2 + FMA, no AVX-512, no
// VNNI; the variant ggml picks on an AVX2-only x86 host), so a host with more can stand in for
// one with less. ggml loads the best-scoring libggml-cpu-*.so beside node-llama-cpp's addon, and
// node-llama-cpp looks for that addon first in its own package's bins/ directory: this builds a
// node_modules tree under /tmp whose node-llama-cpp is a copy of the package's JavaScript (so its
// own directory is that tree's) with a bins/ directory holding the addon and only that variant;
// every other package is a link to the repo's. Returns node-llama-cpp's entry point to import.
export function llamaCpuVariant(variant) {
  const real = path.join(repoRoot, "node_modules");
  const binsFrom = path.join(real, "@node-llama-cpp", "linux-x64", "bins", "linux-x64");
  const want = `libggml-cpu-${variant}.so`;
  if (!fs.existsSync(path.join(binsFrom, want))) {
    const have = fs.readdirSync(binsFrom).filter((f) => f.startsWith("libggml-cpu-")).map((f) => f.slice(12, -3));
    throw new Error(`no llama.cpp CPU variant "${variant}" (have: ${have.join(", ")})`);
  }
  const tree = path.join("/tmp", `daisy-llama-cpu-${variant}`);
  fs.rmSync(tree, {recursive: true, force: true});
  const modules = path.join(tree, "node_modules");
  fs.mkdirSync(modules, {recursive: true});
  for (const name of fs.readdirSync(real)) {
    if (name === "node-llama-cpp") continue;
    if (name.startsWith("@")) {
      fs.mkdirSync(path.join(modules, name));
      for (const sub of fs.readdirSync(path.join(real, name))) fs.symlinkSync(path.join(real, name, sub), path.join(modules, name, sub));
    } else {
      fs.symlinkSync(path.join(real, name), path.join(modules, name));
    }
  }
  const pkgFrom = path.join(real, "node-llama-cpp"), pkg = path.join(modules, "node-llama-cpp");
  fs.mkdirSync(pkg);
  for (const name of fs.readdirSync(pkgFrom)) {
    if (name === "bins") continue;
    if (name === "dist") fs.cpSync(path.join(pkgFrom, name), path.join(pkg, name), {recursive: true});
    else fs.symlinkSync(path.join(pkgFrom, name), path.join(pkg, name));
  }
  const bins = path.join(pkg, "bins", "linux-x64");
  fs.mkdirSync(bins, {recursive: true});
  for (const f of fs.readdirSync(binsFrom)) {
    if (f.startsWith("libggml-cpu-") && f !== want) continue;
    fs.symlinkSync(path.join(binsFrom, f), path.join(bins, f));
  }
  return path.join(pkg, "dist", "index.js");
}
