// Markdown tables (as in docs/benchmarks.md) from the JSON that bench/speculative.mjs or
// bench/serve.mjs printed: median (min–max) tok/s per configuration and mode, the speedup over
// plain, and for speculation the acceptance, tokens per verify, adaptive over the best fixed K
// and the K the adaptive controller chose; for serve with --request-ks, adaptive over the best
// fixed K per server and users.
//
//   node bench/speculative.mjs ... > out/spec.json && node bench/tables.mjs out/spec.json
import fs from "node:fs";
const f = process.argv[2];
const j = JSON.parse(fs.readFileSync(f, "utf8").trim().split("\n").pop());
const r2 = (x) => x.toFixed(2);
const cell = (s) => `${r2(s.median)} (${r2(s.min)}–${r2(s.max)})`;
if (j.bench === "speculative") {
  const many = (j.prompts ?? 1) > 1;
  for (const p of j.pairs) {
    if (p.lookup && Object.keys(p.lookup).length) {
      console.log(`\nprompt lookup on repetitive ids (extra scale ${p.extra_scale}'s target)`);
      console.log(`| where | plain | lookup | × | acceptance | tokens per forward | K chosen (first 16) |`);
      console.log(`|---|---|---|---|---|---|---|`);
      for (const [w, x] of Object.entries(p.lookup)) {
        console.log(`| ${w} | ${cell(x.plain_tok_s)} | ${cell(x.lookup_tok_s)} | ${r2(x.lookup_tok_s.median / x.plain_tok_s.median)} | ${(100 * x.acceptance).toFixed(0)}% | ${x.tokens_per_forward !== undefined ? r2(x.tokens_per_forward) : ""} | ${(x.k_chosen || []).join(",")} |`);
      }
    }
    const ws = Object.entries(p.results);
    if (!ws.length) continue;
    const modes = Object.keys(ws[0][1]);
    console.log(`\nextra scale ${p.extra_scale}`);
    console.log(`| where | ${modes.map((m) => `${m} | ×`).join(" | ")} | acceptance (adaptive) | tokens per verify (adaptive) | adaptive / best fixed | paired |${many ? " over all prompts |" : ""} K chosen (adaptive, first 16) |`);
    console.log(`|---|${modes.map(() => "---|---").join("|")}|---|---|---|---|${many ? "---|" : ""}---|`);
    for (const [w, r] of ws) {
      // The best fixed K by median; "paired": the median over rounds of adaptive / that K in the
      // same round (the two ran minutes apart at most, so slow drift of the machine cancels).
      const [bestK, best] = Object.entries(r).filter(([m]) => m.startsWith("k")).reduce((a, b) => (b[1].tok_s.median > a[1].tok_s.median ? b : a));
      const ratios = r.adaptive.tok_s.runs.map((x, i) => x / best.tok_s.runs[i]).sort((a, b) => a - b);
      // With several prompts: the fixed K with the best mean over all of them (total tokens over
      // total time), and the adaptive K's mean over it.
      const [meanK, meanBest] = Object.entries(r).filter(([m]) => m.startsWith("k")).reduce((a, b) => (b[1].mean_tok_s > a[1].mean_tok_s ? b : a));
      const overAll = many ? ` ${r2(r.adaptive.mean_tok_s)} / ${r2(meanBest.mean_tok_s)} = ${r2(r.adaptive.mean_tok_s / meanBest.mean_tok_s)} (${meanK}) |` : "";
      console.log(`| ${w} | ${modes.map((m) => `${cell(r[m].tok_s)} | ${r2(r[m].speedup_median)}`).join(" | ")} | ${(100 * r.adaptive.acceptance).toFixed(0)}% | ${r2(r.adaptive.tokens_per_forward)} | ${r2(r.adaptive.tok_s.median / best.tok_s.median)} (${bestK}) | ${r2(ratios[Math.floor(ratios.length / 2)])} |${overAll} ${(r.adaptive.k_chosen || []).slice(0, 16).join(",")} |`);
    }
  }
} else if (j.bench === "kreplay") {
  console.log(`verify ms ${j.verify_ms?.map((x) => x.toFixed(0)).join(", ")}; draft ${j.draft_ms?.toFixed(1)} ms a token`);
  // Replays before the profile column have none.
  const withProfile = j.pairs.some((p) => Object.values(p.results).some((x) => x.profile_over_best !== undefined));
  console.log(`| pair | per hop | plain | best fixed K | adaptive, cold | × best | adaptive, warm | × best |${withProfile ? " adaptive, profile | × best |" : ""}`);
  console.log(`|---|---|---|---|---|---|---|---|${withProfile ? "---|---|" : ""}`);
  for (const p of j.pairs) for (const [d, x] of Object.entries(p.results)) {
    const profile = withProfile ? ` ${r2(x.profile_tok_s)} | ${x.profile_over_best.toFixed(3)} |` : "";
    console.log(`| ${p.extra_scale} | ${d} | ${r2(x.plain_tok_s)} | K = ${x.best_fixed_k}: ${r2(x.best_fixed_tok_s)} | ${r2(x.cold_tok_s)} | ${x.cold_over_best.toFixed(3)} | ${r2(x.warm_tok_s)} | ${x.warm_over_best.toFixed(3)} |${profile}`);
  }
} else {
  for (const m of j.results) {
    console.log(`\n${m.model} draft ${m.draft}`);
    console.log(`| server | users | aggregate tok/s | per-user decode tok/s | TTFT s | acceptance | K (mean per verify) | over all rounds |`);
    console.log(`|---|---|---|---|---|---|---|---|`);
    for (const [k, byU] of Object.entries(m.results)) for (const [u, x] of Object.entries(byU))
      console.log(`| ${k} | ${u} | ${cell(x.aggregate_tok_s)} | ${cell(x.per_user_tok_s)} | ${r2(x.ttft_s.median)} | ${x.acceptance !== undefined ? (100 * x.acceptance).toFixed(0) + "%" : ""} | ${x.k_mean !== undefined ? r2(x.k_mean) : ""} | ${x.mean_tok_s !== undefined ? r2(x.mean_tok_s) : ""} |`);
    // With --ab: this build over the other, row by row, by the mean over all rounds.
    const abRows = Object.keys(m.results).filter((k) => m.results[k.replace(/^([^+]*)/, "$1@ab")] && !k.includes("@ab"));
    if (abRows.length) {
      console.log(`\n| row | users | this build | --ab build | this / ab |`);
      console.log(`|---|---|---|---|---|`);
      for (const k of abRows) for (const [u, x] of Object.entries(m.results[k])) {
        const y = m.results[k.replace(/^([^+]*)/, "$1@ab")][u];
        console.log(`| ${k} | ${u} | ${r2(x.mean_tok_s)} | ${r2(y.mean_tok_s)} | ${(x.mean_tok_s / y.mean_tok_s).toFixed(3)} |`);
      }
    }
    // With requests that fixed their own K: adaptive (+spec) over the best of them, per server
    // and users, by the mean over all rounds (total tokens over total time).
    const servers = Object.keys(m.results).filter((k) => !k.includes("+"));
    const fixed = (srv) => Object.keys(m.results).filter((k) => k.startsWith(`${srv}+k`));
    if (servers.some((srv) => fixed(srv).length && m.results[`${srv}+spec`])) {
      console.log(`\n| server | users | adaptive | best fixed K | adaptive / best fixed |`);
      console.log(`|---|---|---|---|---|`);
      for (const srv of servers) {
        if (!fixed(srv).length || !m.results[`${srv}+spec`]) continue;
        for (const [u, x] of Object.entries(m.results[`${srv}+spec`])) {
          const [bk, bx] = fixed(srv).map((k) => [k, m.results[k][u]]).reduce((a, b) => (b[1].mean_tok_s > a[1].mean_tok_s ? b : a));
          console.log(`| ${srv} | ${u} | ${r2(x.mean_tok_s)} | ${bk.split("+")[1]}: ${r2(bx.mean_tok_s)} | ${(x.mean_tok_s / bx.mean_tok_s).toFixed(3)} |`);
        }
      }
    }
  }
}
