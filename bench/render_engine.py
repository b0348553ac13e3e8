#!/usr/bin/env python3
"""Renders bench/engine.mjs JSON output as the Markdown table of docs/benchmarks.md."""
import json
import sys

def main(path):
    j = json.loads(open(path).read().strip().splitlines()[-1])
    bw = j["machine_read_gb_s"]
    print(f"Machine read bandwidth during the run (min/median/max GB/s): 1 thread "
          f"{bw['one_thread']['min']}/{bw['one_thread']['median']}/{bw['one_thread']['max']}, "
          f"2 threads {bw['two_threads']['min']}/{bw['two_threads']['median']}/{bw['two_threads']['max']}.\n")
    print("| model | threads | daisy prompt tok/s | llama.cpp prompt tok/s | ratio | daisy decode tok/s | llama.cpp decode tok/s | ratio | daisy decode GB/s | llama.cpp decode GB/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    fmt = lambda s: f"{s['median']} ({s['min']}–{s['max']})"
    for r in j["rows"]:
        print(f"| {r['model']} | {r['threads']} | {fmt(r['daisy']['prompt_tok_s'])} | {fmt(r['llamacpp']['prompt_tok_s'])} | "
              f"**{r['ratio_prompt']}** | {fmt(r['daisy']['decode_tok_s'])} | {fmt(r['llamacpp']['decode_tok_s'])} | "
              f"**{r['ratio_decode']}** | {r['daisy_decode_gb_s']} | {r['llamacpp_decode_gb_s']} |")

if __name__ == "__main__":
    main(sys.argv[1])
