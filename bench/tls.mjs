// The cost of TLS per hop, side by side in one run (bench/README: alternate, repeat,
// min/median/max): a 2-layer model with the 8B's width (4096: 16 KiB of f32 activations per row
// per hop) split in two, stage 1 in a worker over loopback, once with plain links (HMAC-keyed)
// and once with --tls (TLS 1.3 keyed by the same cluster key), each node pinned to its own core.
//   decode: 256 tokens after a 4-token prompt; extra time per hop = (1/tls - 1/plain) / 2 per token
//   prompt: a 512-token prompt in one 512-row forward (8 MiB per hop each way... one way: the
//           hidden state goes to the worker, the sampled token comes back), prompt tokens/s
//
//   node bench/tls.mjs [--rounds 5] [--dir /tmp/daisy-bench]
import fs from "node:fs";
import path from "node:path";
import {daisyBinary, parseArgs} from "../tests/parity/lib.mjs";
import {daisyRunner, hopShards, stats} from "./lib.mjs";

const args = parseArgs();
const bin = daisyBinary(args);
const rounds = Number(args.rounds ?? 5);
const dir = args.dir ?? "/tmp/daisy-bench";
fs.mkdirSync(dir, {recursive: true});
const log = (...a) => console.error("[bench]", ...a);
const {daisy, background} = daisyRunner(bin);

const [s0, s1] = hopShards(daisy, dir);
const key = path.join(dir, "tls-bench.key");
fs.writeFileSync(key, "bench-cluster-key-0123456789abcdef\n");
const keyed = ["--key-file", key];
const plainWorker = await background(["worker", "--shard", s1, "--listen", "127.0.0.1:0", "-t", "1", ...keyed], 1);
const tlsWorker = await background(["worker", "--shard", s1, "--listen", "127.0.0.1:0", "-t", "1", ...keyed, "--tls"], 1);
const configs = {
  plain: ["--workers", `127.0.0.1:${plainWorker.ready.port}`, ...keyed],
  tls: ["--workers", `127.0.0.1:${tlsWorker.ready.port}`, ...keyed, "--tls"],
};
const longIds = Array.from({length: 512}, (_, i) => (i * 37) % 300 + 10).join(",");  // the tiny vocabulary: 312 ids
const decodeArgs = ["--ids", "1,2,3,4", "-n", "256", "--ignore-eos", "--json", "-t", "1"];
const promptArgs = ["--ids", longIds, "-n", "1", "--json", "-t", "1", "-b", "512"];
const decode = {plain: [], tls: []}, prompt = {plain: [], tls: []}, us = [];
for (const k of Object.keys(configs)) daisy(["run", "--shard", s0, ...configs[k], ...decodeArgs], 0);  // warm-up
for (let r = 0; r < rounds; r++) {
  const keys = r % 2 === 0 ? ["plain", "tls"] : ["tls", "plain"];
  const got = {};
  for (const k of keys) {
    got[k] = daisy(["run", "--shard", s0, ...configs[k], ...decodeArgs], 0).decode_tok_s;
    decode[k].push(got[k]);
    prompt[k].push(daisy(["run", "--shard", s0, ...configs[k], ...promptArgs], 0).prompt_tok_s);
  }
  us.push(((1 / got.tls - 1 / got.plain) / 2) * 1e6);
  log(`round ${r + 1}: decode plain ${got.plain.toFixed(0)} tls ${got.tls.toFixed(0)} tok/s (${us[r].toFixed(1)} us per hop); ` +
      `prompt plain ${prompt.plain[r].toFixed(0)} tls ${prompt.tls[r].toFixed(0)} tok/s`);
}
plainWorker.proc.kill("SIGTERM");
tlsWorker.proc.kill("SIGTERM");
console.log(JSON.stringify({bench: "tls", rounds, model: "2 layers, d_model 4096, q8_0, 2 stages over loopback",
                            decode_tok_s: {plain: stats(decode.plain), tls: stats(decode.tls)},
                            tls_extra_us_per_hop: stats(us),
                            prompt_512_tok_s: {plain: stats(prompt.plain), tls: stats(prompt.tls)}}));
process.exit(0);
