#!/usr/bin/env python3
"""Renders bench/engine.mjs results as the Markdown table of docs/benchmarks.md.

Arguments: files holding either the script's JSON output (last line) or its stderr log (rows
are the '[bench] {...}' lines). Rows are merged in the order given; machine bandwidth comes from
the JSON outputs."""
import json
import sys


def load(path):
    rows, bws = [], []
    for line in open(path):
        line = line.strip()
        if line.startswith("[bench] {"):
            rows.append(json.loads(line[len("[bench] "):]))
        elif line.startswith('{"bench":"engine"'):
            j = json.loads(line)
            bws.append(j["machine_read_gb_s"])
    return rows, bws


def main(paths):
    rows, bws = [], []
    for p in paths:
        r, b = load(p)
        rows += r
        bws += b
    for bw in bws:
        print(f"- machine read bandwidth in that run (min/median/max GB/s): 1 thread "
              f"{bw['one_thread']['min']}/{bw['one_thread']['median']}/{bw['one_thread']['max']}, "
              f"2 threads {bw['two_threads']['min']}/{bw['two_threads']['median']}/{bw['two_threads']['max']}")
    print()
    print("| model | threads | daisy prompt tok/s | llama.cpp prompt tok/s | ratio | daisy decode tok/s | llama.cpp decode tok/s | ratio | daisy decode GB/s | llama.cpp decode GB/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    fmt = lambda s: f"{s['median']} ({s['min']}–{s['max']})"
    for r in rows:
        print(f"| {r['model']} | {r['threads']} | {fmt(r['daisy']['prompt_tok_s'])} | {fmt(r['llamacpp']['prompt_tok_s'])} | "
              f"**{r['ratio_prompt']}** | {fmt(r['daisy']['decode_tok_s'])} | {fmt(r['llamacpp']['decode_tok_s'])} | "
              f"**{r['ratio_decode']}** | {r['daisy_decode_gb_s']} | {r['llamacpp_decode_gb_s']} |")


if __name__ == "__main__":
    main(sys.argv[1:])
