#!/usr/bin/python3
"""Trains daisy's real small models on the King James Bible and writes them as GGUF.

A tool for making test and demo assets, not part of daisy. Everything comes from Debian
packages (tools/kjv/setup.sh installs them): the text from bible-kjv (`bible -f`), the
vocabulary from SentencePiece, the training from PyTorch (over OpenBLAS). The same seed, text
package and package versions give the same files.

  tools/kjv/setup.sh && tools/kjv/train.py --out models/kjv   (Debian's /usr/bin/python3)

Writes, in --out:
  tokenizer.model              SentencePiece (BPE with byte fallback), trained on the training text
  heldout.txt                  the held-out chapters (every 20th), for perplexity
  kjv-target-f32.gguf / -f16   the target: a Llama (RMSNorm, RoPE, SwiGLU, grouped-query attention)
  kjv-draft-f32.gguf / -f16    the draft: a smaller Llama of its own training, same vocabulary
  train.json                   how they were made: seed, shapes, steps, losses, package versions
"""
import argparse
import json
import math
import os
import random
import struct
import subprocess
import sys
import time

import numpy as np
import sentencepiece as spm
import torch
import torch.nn.functional as F

HELDOUT_EVERY = 20  # every 20th chapter is held out


def package_version(name):
    try:
        return subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def read_bible():
    """The KJV as chapters of verses: [(book chapter, [verse text, ...]), ...]."""
    out = subprocess.run(["bible", "-f", "Genesis 1:1-Revelation 22:21"], capture_output=True, text=True, check=True).stdout
    chapters, current, verses = [], None, []
    for line in out.splitlines():
        line = line.strip()
        if not line:
            continue
        # "Gen1:1 In the beginning ..." (the reference, then the verse)
        ref, _, text = line.partition(" ")
        chapter = ref.rsplit(":", 1)[0]
        if chapter != current:
            if verses:
                chapters.append((current, verses))
            current, verses = chapter, []
        verses.append(text.strip())
    if verses:
        chapters.append((current, verses))
    return chapters


# --- The model -------------------------------------------------------------------------------

class Config:
    def __init__(self, vocab, dim, layers, heads, kv_heads, ffn, ctx):
        self.vocab, self.dim, self.layers, self.heads, self.kv_heads, self.ffn, self.ctx = (
            vocab, dim, layers, heads, kv_heads, ffn, ctx)
        self.head_dim = dim // heads
        self.eps = 1e-5
        self.rope_base = 10000.0

    def as_dict(self):
        return {k: getattr(self, k) for k in ("vocab", "dim", "layers", "heads", "kv_heads", "ffn", "ctx", "eps", "rope_base")}


def rope_tables(cfg, n):
    # llama.cpp's "normal" RoPE (the llama architecture): dimensions (2i, 2i+1) rotate together by
    # pos * base^(-2i/head_dim).
    inv = cfg.rope_base ** (-torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim)
    ang = torch.arange(n, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cos(ang), torch.sin(ang)


def apply_rope(x, cos, sin):
    # x: [batch, heads, seq, head_dim]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, hd = cfg.dim, cfg.head_dim
        self.attn_norm = RMSNorm(d, cfg.eps)
        self.wq = torch.nn.Linear(d, cfg.heads * hd, bias=False)
        self.wk = torch.nn.Linear(d, cfg.kv_heads * hd, bias=False)
        self.wv = torch.nn.Linear(d, cfg.kv_heads * hd, bias=False)
        self.wo = torch.nn.Linear(cfg.heads * hd, d, bias=False)
        self.ffn_norm = RMSNorm(d, cfg.eps)
        self.w_gate = torch.nn.Linear(d, cfg.ffn, bias=False)
        self.w_up = torch.nn.Linear(d, cfg.ffn, bias=False)
        self.w_down = torch.nn.Linear(cfg.ffn, d, bias=False)

    def forward(self, x, cos, sin, mask):
        cfg = self.cfg
        b, n, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(b, n, cfg.heads, cfg.head_dim).transpose(1, 2)
        k = self.wk(h).view(b, n, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
        v = self.wv(h).view(b, n, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = cfg.heads // cfg.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(cfg.head_dim) + mask
        a = torch.softmax(scores, dim=-1) @ v
        x = x + self.wo(a.transpose(1, 2).reshape(b, n, cfg.heads * cfg.head_dim))
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Llama(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = torch.nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = torch.nn.ModuleList([Block(cfg) for _ in range(cfg.layers)])
        self.norm = RMSNorm(cfg.dim, cfg.eps)
        # The head shares the embeddings (GGUF: no output.weight; llama.cpp uses token_embd).
        for name, p in self.named_parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, 0.0, 0.02)
            if name.endswith("wo.weight") or name.endswith("w_down.weight"):
                torch.nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.layers))
        cos, sin = rope_tables(cfg, cfg.ctx)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("mask", torch.full((cfg.ctx, cfg.ctx), float("-inf")).triu(1), persistent=False)

    def forward(self, ids):
        n = ids.shape[1]
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x, self.cos[:n], self.sin[:n], self.mask[:n, :n])
        return self.norm(x) @ self.embed.weight.T

    def params(self):
        return sum(p.numel() for p in self.parameters())


# --- Training --------------------------------------------------------------------------------

def batches(stream, starts, batch, n, rng):
    while True:
        idx = rng.choice(starts, size=batch)
        x = np.stack([stream[i:i + n + 1] for i in idx])
        t = torch.from_numpy(x.astype(np.int64))
        yield t[:, :-1], t[:, 1:]


def evaluate(model, stream, n, max_windows=64):
    model.eval()
    losses = []
    with torch.no_grad():
        for i in range(0, min(len(stream) - n - 1, max_windows * n), n):
            t = torch.from_numpy(stream[i:i + n + 1].astype(np.int64))[None]
            logits = model(t[:, :-1])
            losses.append(F.cross_entropy(logits[0], t[0, 1:]).item())
    model.train()
    return float(np.mean(losses))


def train(name, cfg, stream, held, steps, batch, lr, seed, log):
    torch.manual_seed(seed)
    model = Llama(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    rng = np.random.default_rng(seed)
    starts = np.arange(0, len(stream) - cfg.ctx - 1)
    it = batches(stream, starts, batch, cfg.ctx, rng)
    warm = max(1, steps // 20)
    t0, history = time.time(), []
    print(f"{name}: {model.params() / 1e6:.2f}M parameters, {steps} steps of {batch}x{cfg.ctx} tokens", file=log, flush=True)
    for step in range(1, steps + 1):
        scale = step / warm if step <= warm else 0.5 * (1 + math.cos(math.pi * (step - warm) / (steps - warm)))
        for g in opt.param_groups:
            g["lr"] = lr * max(scale, 0.02)
        x, y = next(it)
        loss = F.cross_entropy(model(x).reshape(-1, cfg.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == steps:
            spent = time.time() - t0
            held_loss = evaluate(model, held, cfg.ctx, 16) if step % 250 == 0 or step == steps else float("nan")
            history.append({"step": step, "loss": round(loss.item(), 4), "heldout_loss": round(held_loss, 4)})
            print(f"{name}: step {step}/{steps} loss {loss.item():.3f} held-out {held_loss:.3f} "
                  f"({spent:.0f} s, {spent / step * (steps - step) / 60:.1f} min left)", file=log, flush=True)
    return model, history


# --- GGUF ------------------------------------------------------------------------------------

GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_F16 = 0, 1


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(kind, v):
    if kind == GGUF_U32:
        return struct.pack("<I", v)
    if kind == GGUF_I32:
        return struct.pack("<i", v)
    if kind == GGUF_F32:
        return struct.pack("<f", v)
    if kind == GGUF_BOOL:
        return struct.pack("<B", 1 if v else 0)
    if kind == GGUF_STRING:
        return gguf_string(v)
    raise ValueError(kind)


def write_gguf(path, cfg, model, sp, ftype, meta):
    kv = []

    def put(key, kind, v):
        kv.append(gguf_string(key) + struct.pack("<I", kind) + gguf_value(kind, v))

    def put_array(key, kind, values):
        body = b"".join(gguf_value(kind, v) for v in values)
        kv.append(gguf_string(key) + struct.pack("<I", GGUF_ARRAY) + struct.pack("<IQ", kind, len(values)) + body)

    put("general.architecture", GGUF_STRING, "llama")
    put("general.name", GGUF_STRING, meta["name"])
    put("general.description", GGUF_STRING, meta["description"])
    put("general.file_type", GGUF_U32, 0 if ftype == GGML_F32 else 1)
    put("llama.context_length", GGUF_U32, cfg.ctx)
    put("llama.embedding_length", GGUF_U32, cfg.dim)
    put("llama.block_count", GGUF_U32, cfg.layers)
    put("llama.feed_forward_length", GGUF_U32, cfg.ffn)
    put("llama.rope.dimension_count", GGUF_U32, cfg.head_dim)
    put("llama.attention.head_count", GGUF_U32, cfg.heads)
    put("llama.attention.head_count_kv", GGUF_U32, cfg.kv_heads)
    put("llama.attention.layer_norm_rms_epsilon", GGUF_F32, cfg.eps)
    put("llama.rope.freq_base", GGUF_F32, cfg.rope_base)
    put("llama.vocab_size", GGUF_U32, cfg.vocab)
    put("tokenizer.ggml.model", GGUF_STRING, "llama")
    pieces, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        pieces.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i)
                     else 5 if sp.is_unused(i) else 1)
    put_array("tokenizer.ggml.tokens", GGUF_STRING, pieces)
    put_array("tokenizer.ggml.scores", GGUF_F32, scores)
    put_array("tokenizer.ggml.token_type", GGUF_I32, types)
    put("tokenizer.ggml.bos_token_id", GGUF_U32, sp.bos_id())
    put("tokenizer.ggml.eos_token_id", GGUF_U32, sp.eos_id())
    put("tokenizer.ggml.unknown_token_id", GGUF_U32, sp.unk_id())
    put("tokenizer.ggml.add_bos_token", GGUF_BOOL, True)
    put("tokenizer.ggml.add_eos_token", GGUF_BOOL, False)

    sd = model.state_dict()
    tensors = [("token_embd.weight", sd["embed.weight"], True)]
    for i in range(cfg.layers):
        p = f"blocks.{i}."
        tensors += [(f"blk.{i}.attn_norm.weight", sd[p + "attn_norm.weight"], False),
                    (f"blk.{i}.attn_q.weight", sd[p + "wq.weight"], True),
                    (f"blk.{i}.attn_k.weight", sd[p + "wk.weight"], True),
                    (f"blk.{i}.attn_v.weight", sd[p + "wv.weight"], True),
                    (f"blk.{i}.attn_output.weight", sd[p + "wo.weight"], True),
                    (f"blk.{i}.ffn_norm.weight", sd[p + "ffn_norm.weight"], False),
                    (f"blk.{i}.ffn_gate.weight", sd[p + "w_gate.weight"], True),
                    (f"blk.{i}.ffn_up.weight", sd[p + "w_up.weight"], True),
                    (f"blk.{i}.ffn_down.weight", sd[p + "w_down.weight"], True)]
    tensors.append(("output_norm.weight", sd["norm.weight"], False))

    align = 32
    infos, blobs, offset = [], [], 0
    for name, t, matrix in tensors:
        a = t.detach().to(torch.float32).numpy()
        kind = ftype if matrix else GGML_F32  # norms stay f32, as llama.cpp writes them
        data = (a.astype(np.float16) if kind == GGML_F16 else a.astype(np.float32)).tobytes()
        dims = list(reversed(a.shape))  # ggml: the fastest-varying dimension first
        infos.append(gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
                     + struct.pack("<IQ", kind, offset))
        pad = (-len(data)) % align
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + b"".join(kv) + b"".join(infos)
    header += b"\0" * ((-len(header)) % align)
    with open(path, "wb") as f:
        f.write(header)
        for b in blobs:
            f.write(b)


# --- Main ------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="models/kjv")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--target-steps", type=int, default=1200)
    ap.add_argument("--draft-steps", type=int, default=800)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--quick", action="store_true", help="a few steps of each (checks the script, not a model)")
    args = ap.parse_args()
    if args.quick:
        args.target_steps, args.draft_steps = 20, 20
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    log = sys.stderr

    chapters = read_bible()
    train_text = [" ".join(v) for i, (_, v) in enumerate(chapters) if i % HELDOUT_EVERY != HELDOUT_EVERY - 1]
    held_text = [" ".join(v) for i, (_, v) in enumerate(chapters) if i % HELDOUT_EVERY == HELDOUT_EVERY - 1]
    print(f"text: {len(chapters)} chapters; {len(train_text)} for training, {len(held_text)} held out", file=log, flush=True)
    with open(os.path.join(args.out, "heldout.txt"), "w") as f:
        f.write("\n".join(held_text) + "\n")
    corpus = os.path.join(args.out, ".train.txt")
    with open(corpus, "w") as f:
        f.write("\n".join(train_text) + "\n")

    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=os.path.join(args.out, "tokenizer"), vocab_size=args.vocab, model_type="bpe",
        byte_fallback=True, character_coverage=1.0, split_digits=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        normalization_rule_name="identity", add_dummy_prefix=True, remove_extra_whitespaces=False,
        max_sentence_length=1 << 16, num_threads=1, minloglevel=2)
    os.remove(os.path.join(args.out, "tokenizer.vocab"))
    os.remove(corpus)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.out, "tokenizer.model"))

    def encode(texts):
        ids = []
        for t in texts:
            ids.append(sp.bos_id())
            ids.extend(sp.encode(t))
        return np.array(ids, dtype=np.int32)

    stream, held = encode(train_text), encode(held_text)
    print(f"tokens: {len(stream)} for training, {len(held)} held out ({args.vocab} pieces)", file=log, flush=True)

    shapes = {
        "target": Config(args.vocab, dim=256, layers=6, heads=8, kv_heads=4, ffn=768, ctx=256),
        "draft": Config(args.vocab, dim=128, layers=2, heads=4, kv_heads=2, ffn=512, ctx=256),
    }
    report = {"seed": args.seed, "text": f"bible-kjv-text {package_version('bible-kjv-text')} "
                                          f"(bible -f 'Genesis 1:1-Revelation 22:21'), every {HELDOUT_EVERY}th chapter held out",
              "packages": {p: package_version(p) for p in ("python3-torch", "python3-sentencepiece", "libopenblas0-pthread",
                                                           "bible-kjv", "bible-kjv-text")},
              "tokens": {"train": int(len(stream)), "heldout": int(len(held))}, "models": {}}
    for name, steps, lr, seed in (("target", args.target_steps, 2e-3, args.seed), ("draft", args.draft_steps, 3e-3, args.seed + 1)):
        cfg = shapes[name]
        t0 = time.time()
        model, history = train(name, cfg, stream, held, steps, args.batch, lr, seed, log)
        meta = {"name": f"daisy-kjv-{name}",
                "description": f"A {model.params() / 1e6:.1f}M-parameter Llama trained by daisy's tools/kjv/train.py "
                               f"(seed {seed}, {steps} steps) on the King James Bible (public domain)"}
        for ftype, suffix in ((GGML_F32, "f32"), (GGML_F16, "f16")):
            write_gguf(os.path.join(args.out, f"kjv-{name}-{suffix}.gguf"), cfg, model, sp, ftype, meta)
        report["models"][name] = {"config": cfg.as_dict(), "parameters": model.params(), "steps": steps, "lr": lr,
                                  "seed": seed, "batch": args.batch, "minutes": round((time.time() - t0) / 60, 1),
                                  "heldout_loss": evaluate(model, held, cfg.ctx), "history": history}
        print(f"{name}: held-out loss {report['models'][name]['heldout_loss']:.3f} "
              f"(perplexity {math.exp(report['models'][name]['heldout_loss']):.1f} per token)", file=log, flush=True)
    with open(os.path.join(args.out, "train.json"), "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
