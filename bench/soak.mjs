// Soak: `daisy serve` on a 2-stage pipeline (stage 0 in the server, stage 1 in a worker over
// loopback) under --clients concurrent clients for --minutes, with clients that disconnect
// mid-stream, requests cancelled before their answer, and the worker killed (SIGKILL and SIGTERM
// in turn) and started again on its port every --restart-every seconds. Every request that is
// not abandoned by its own client must come back complete and exact: its text equal to
// `daisy run` on the whole model for the same prompt and sampling (greedy and seeded). Samples
// the server's and the worker's resident memory and /metrics every 30 s. At the end every
// stage must hold no sequence and the queue must be empty. Not a CI test (issue #23's soak).
//
//   node bench/soak.mjs [--minutes 30] [--clients 64] [--restart-every 180] [--dir /tmp/daisy-soak]
//
// Prints one JSON object (last line): requests by outcome, lost and corrupted counts, restarts,
// resumes, memory at the start, after warm-up and at the end, and the final state of the stages.
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import {daisyBinary, parseArgs, tokenizerJson} from "../tests/parity/lib.mjs";
import {daisyRunner} from "./lib.mjs";

const args = parseArgs();
const bin = daisyBinary(args);
const minutes = Number(args.minutes ?? 30);
const nClients = Number(args.clients ?? 64);
const restartEvery = Number(args["restart-every"] ?? 180);
const dir = args.dir ?? "/tmp/daisy-soak";
fs.mkdirSync(dir, {recursive: true});
const log = (...a) => console.error(`[soak ${new Date().toISOString().slice(11, 19)}]`, ...a);
const {daisy, background} = daisyRunner(bin);

const model = path.join(dir, "m.gguf");
if (!fs.existsSync(model)) {
  daisy(["gen-model", "--shape", "small", "--layers", "4", "--type", "q8_0", "--seed", "23", "--tokenizer",
         tokenizerJson("llama3"), "-o", model, "--json"]);
}
const shards = path.join(dir, "s2");
if (!fs.existsSync(path.join(shards, "stage-1.daisy"))) daisy(["compile", "-m", model, "--stages", "2", "-o", shards, "--json"]);

// The requests: prompts of different lengths, greedy and seeded sampling, short and longer answers.
const WORDS = "the quick brown fox jumps over a lazy dog while pipelines carry activations between machines".split(" ");
const CASES = Array.from({length: 12}, (_, i) => ({
  prompt: Array.from({length: 3 + ((i * 7) % 40)}, (_, j) => WORDS[(i * 5 + j * 3) % WORDS.length]).join(" "),
  max_tokens: 8 + ((i * 13) % 48),
  temperature: i % 3 === 2 ? 0.8 : 0,
  seed: 100 + i,
}));
log("reference texts from daisy run on the whole model");
for (const c of CASES) {
  c.want = daisy(["run", "-m", model, "-p", c.prompt, "-n", String(c.max_tokens), "--temp", String(c.temperature),
                  "--seed", String(c.seed), "--top-k", "0", "--top-p", "1", "--min-p", "0", "-t", "1", "--json"]).text;
}

const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, "127.0.0.1", () => {
    const p = s.address().port;
    s.close(() => resolve(p));
  });
});
const wport = await freePort();
const startWorker = () => background(["worker", "--shard", path.join(shards, "stage-1.daisy"), "--listen", `127.0.0.1:${wport}`, "-t", "1"]);
let worker = await startWorker();
const server = await background(["serve", "--shard", path.join(shards, "stage-0.daisy"), "--workers", `127.0.0.1:${wport}`,
                                 "--http", "127.0.0.1:0", "-t", "1", "--ctx", "512", "--max-seqs", "8", "--queue", "128",
                                 "--resume-wait", "60", "--peer-timeout", "3", "--connect-timeout", "10"]);
const base = `http://127.0.0.1:${server.ready.port}`;

async function metrics() {
  const text = await (await fetch(`${base}/metrics`)).text();
  const out = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    out[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  return out;
}
const rssKb = (pid) => {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)[1]);
  } catch {
    return null;
  }
};

const counts = {ok: 0, corrupted: 0, lost: 0, refused: 0, disconnected: 0, cancelled: 0};
const failures = [];
const body = (c, stream) => JSON.stringify({model: server.ready.model, prompt: c.prompt, max_tokens: c.max_tokens,
                                            temperature: c.temperature, seed: c.seed, stream});

// One request to its end. mode: "whole" (checked), "disconnect" (the client leaves mid-stream),
// "cancel" (the client gives up before the answer).
async function one(c, mode, stream) {
  const ctl = new AbortController();
  const guard = setTimeout(() => ctl.abort(new Error("no answer within 180 s")), 180000);
  try {
    if (mode === "cancel") setTimeout(() => ctl.abort(new Error("cancelled")), Math.random() * 300);
    const r = await fetch(`${base}/v1/completions`, {method: "POST", body: body(c, stream || mode === "disconnect"),
                                                     headers: {"Content-Type": "application/json"}, signal: ctl.signal});
    if (r.status === 429 || r.status === 503) {
      await r.text();
      return "refused";
    }
    if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
    let text = "";
    if (stream || mode === "disconnect") {
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "", events = 0, done = false;
      const leaveAfter = 1 + Math.floor(Math.random() * 5);
      while (!done) {
        const {value, done: end} = await reader.read();
        if (end) break;
        buf += dec.decode(value, {stream: true});
        let nl;
        while ((nl = buf.indexOf("\n\n")) >= 0) {
          const ev = buf.slice(0, nl);
          buf = buf.slice(nl + 2);
          if (!ev.startsWith("data: ")) continue;
          if (ev === "data: [DONE]") {
            done = true;
            break;
          }
          const j = JSON.parse(ev.slice(6));
          if (j.error) throw new Error(`stream error: ${j.error.message}`);
          text += j.choices?.[0]?.text ?? "";
          if (mode === "disconnect" && ++events >= leaveAfter) {
            ctl.abort(new Error("disconnected"));
            return "disconnected";
          }
        }
      }
      if (!done && mode !== "disconnect") throw new Error("the stream ended without [DONE]");
      if (mode === "disconnect") return "disconnected";  // it ended before we left
    } else {
      text = (await r.json()).choices[0].text;
    }
    if (mode === "cancel") return "cancelled";  // answered before the cancel: fine either way
    if (text !== c.want) {
      failures.push({kind: "corrupted", prompt: c.prompt, got: text, want: c.want});
      return "corrupted";
    }
    return "ok";
  } catch (e) {
    if (mode !== "whole" && ctl.signal.aborted && String(ctl.signal.reason?.message) !== "no answer within 180 s") {
      return mode === "cancel" ? "cancelled" : "disconnected";
    }
    failures.push({kind: "lost", prompt: c.prompt, error: String(e?.message ?? e)});
    return "lost";
  } finally {
    clearTimeout(guard);
  }
}

const t0 = Date.now();
const deadline = t0 + minutes * 60000;
async function client(k) {
  while (Date.now() < deadline) {
    const c = CASES[Math.floor(Math.random() * CASES.length)];
    const r = Math.random();
    const mode = r < 0.6 ? "whole" : r < 0.8 ? "disconnect" : "cancel";
    const outcome = await one(c, mode, Math.random() < 0.5);
    counts[outcome]++;
    if (outcome === "refused") await new Promise((res) => setTimeout(res, 200));
  }
}

// Worker restarts: SIGKILL and SIGTERM in turn, back after a second on the same port.
let restarts = 0;
const restarter = (async () => {
  while (Date.now() + restartEvery * 1000 < deadline) {
    await new Promise((r) => setTimeout(r, restartEvery * 1000));
    const sig = restarts % 2 === 0 ? "SIGKILL" : "SIGTERM";
    log(`restart ${restarts + 1}: ${sig} to the worker`);
    const exited = new Promise((r) => worker.proc.on("exit", r));
    worker.proc.kill(sig);
    await exited;
    await new Promise((r) => setTimeout(r, 1000));
    worker = await startWorker();
    restarts++;
  }
})();

const samples = [];
const sampler = setInterval(async () => {
  try {
    const m = await metrics();
    const s = {t_s: Math.round((Date.now() - t0) / 1000), serve_rss_kb: rssKb(server.proc.pid), worker_rss_kb: rssKb(worker.proc.pid),
               active: m.daisy_active_sequences, queued: m.daisy_queue_depth, connections: m.daisy_http_connections_open,
               resumes: m.daisy_resumes_total, ...counts};
    samples.push(s);
    log(JSON.stringify(s));
  } catch (e) {
    log(`sample failed: ${e.message}`);
  }
}, 30000);

log(`${nClients} clients for ${minutes} min, worker restart every ${restartEvery} s`);
await Promise.all(Array.from({length: nClients}, (_, k) => client(k)));
await restarter;
clearInterval(sampler);

// The end state: nothing queued, no sequence on any stage (the worker's count comes with its
// pongs, so give it a few seconds).
let end = await metrics();
for (let i = 0; i < 40; i++) {
  const held = Object.entries(end).filter(([k]) => k.startsWith("daisy_stage_sequences"));
  if (end.daisy_active_sequences === 0 && end.daisy_queue_depth === 0 && held.length === 2 && held.every(([, v]) => v === 0)) break;
  await new Promise((r) => setTimeout(r, 500));
  end = await metrics();
}
const stageSeqs = Object.fromEntries(Object.entries(end).filter(([k]) => k.startsWith("daisy_stage_sequences")));
const after = samples.find((s) => s.t_s >= Math.min(300, minutes * 60 / 4)) ?? samples[0];
const last = samples[samples.length - 1];
const result = {
  bench: "soak", minutes, clients: nClients, restart_every_s: restartEvery, restarts,
  requests: counts, failures: failures.slice(0, 20),
  resumes: end.daisy_resumes_total, ring_failures: end.daisy_ring_failures_total,
  refilled_tokens: end.daisy_refilled_tokens_total, paused_seconds: end.daisy_paused_seconds_total,
  generated_tokens: end.daisy_generated_tokens_total,
  end_state: {active: end.daisy_active_sequences, queued: end.daisy_queue_depth, stage_sequences: stageSeqs},
  serve_rss_kb: {first: samples[0]?.serve_rss_kb, after_warmup: after?.serve_rss_kb, end: last?.serve_rss_kb,
                 max: Math.max(...samples.map((s) => s.serve_rss_kb ?? 0))},
  worker_rss_kb_end: last?.worker_rss_kb,
  samples,
};
result.pass = counts.lost === 0 && counts.corrupted === 0 && end.daisy_active_sequences === 0 &&
              end.daisy_queue_depth === 0 && Object.values(stageSeqs).every((v) => v === 0) && Object.keys(stageSeqs).length === 2;
console.log(JSON.stringify(result));
server.proc.kill("SIGTERM");
worker.proc.kill("SIGTERM");
process.exit(result.pass ? 0 : 1);
