#!/usr/bin/env python3
"""PyTorch side of bench/gpu/run_gpt2_124m.sh (runs on the GPU machine).

    python3 bench/gpu/torch_gpt2_124m.py --out DIR [--batch 8 --seq 1024 --steps 200]
    python3 bench/gpu/torch_gpt2_124m.py --compare DIR

1. The nanoGPT-layout GPT-2 124M of models/zoo/make_zoo.py (vocab 50304, 12 x
   768, tied embeddings, learned positions, SDPA causal, tanh GELU), its
   weights from make_zoo's seed, exported by both exporters to
   DIR/gpt2_124m_{dynamo,torchscript}/model.onnx with input [batch, seq].
2. DIR/tokens.npy: a fixed, learnable token stream (uint16): a random
   bigram chain where each token has 4 likely successors, so the loss falls
   from ~ln(50257) towards ~ln(4) and a wrong gradient shows.
3. Trains the same weights in PyTorch on the same windows that
   `teexec train --data DIR/tokens.npy --seq T --batch B` walks (row r of
   step s starts at ((s*B + r) * T) mod (N - T)): bf16 autocast, fused
   AdamW (lr 6e-4, eps 1e-8, weight decay 0.01, betas --beta1/--beta2,
   teexec's defaults 0.9/0.999), optionally nanoGPT's schedule: a linear
   warmup over --warmup-steps (lr * (s+1) / W, as `teexec train
   --warmup-steps`) and clip_grad_norm_ to --clip-grad-norm (as `teexec
   train --clip-grad-norm`), `--steps` steps eager (the reference loss curve,
   DIR/torch_losses.npy) and a shorter run under torch.compile for speed.
   Writes DIR/torch.json: tokens/s of both, peak device memory
   (max_memory_allocated) of the eager step.
4. --compare DIR reads DIR/torch.json, DIR/torch_losses.npy and
   DIR/teexec_*.json (`teexec train --json`) and prints the table: tokens/s
   and ratios, and the largest relative loss difference at every 10th step.
"""
import argparse
import glob
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models", "zoo"))

VOCAB, LAYERS, HEADS, WIDTH, BLOCK = 50304, 12, 12, 768, 1024
ADAMW = dict(lr=6e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def build(torch, make_zoo):
    """The 124M with make_zoo.gpt2_124m's weights (same seed, same order)."""
    torch.manual_seed(1234)
    model = make_zoo.nanogpt_class()(VOCAB, BLOCK, LAYERS, HEADS, WIDTH)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
        # Every norm gain and bias its own values: both exporters merge
        # initializers of equal value, so 25 LayerNorms initialized to ones
        # and zeros become ONE shared gain and ONE shared bias in the ONNX
        # file, and training the file ties them (a different model from
        # PyTorch's; bench/gpu/gpt2_124m_grads.py showed it).
        g = torch.Generator().manual_seed(99)
        for mname, m in model.named_modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.copy_(1.0 + 0.02 * torch.randn(m.weight.shape, generator=g))
                m.bias.copy_(0.02 * torch.randn(m.bias.shape, generator=g))
    return model


def token_stream(n, seed=7, vocab=50257, fan=4):
    rng = np.random.default_rng(seed)
    succ = rng.integers(0, vocab, size=(vocab, fan))
    probs = np.array([0.55, 0.25, 0.15, 0.05])
    toks = np.empty(n, np.uint16)
    t = int(rng.integers(0, vocab))
    choice = rng.choice(fan, size=n, p=probs)
    for i in range(n):
        toks[i] = t
        t = int(succ[t, choice[i]])
    return toks


def windows(toks, s, b, t):
    n = len(toks)
    ids = np.empty((b, t), np.int64)
    lab = np.empty((b, t), np.int64)
    for r in range(b):
        start = ((s * b + r) * t) % (n - t)
        ids[r] = toks[start:start + t]
        lab[r] = toks[start + 1:start + t + 1]
    return ids, lab


def adamw(a):
    return {**ADAMW, "betas": (a.beta1, a.beta2)}


def lr_at(a, s):
    """teexec's tx_train_lr_at without a decay: the warmup, then constant."""
    if a.warmup_steps > 0 and s < a.warmup_steps:
        return ADAMW["lr"] * (s + 1) / a.warmup_steps
    return ADAMW["lr"]


def train(torch, model, toks, a, steps, compiled, autocast=True):
    import contextlib
    import torch.nn.functional as F
    model = model.cuda().train()
    opt = torch.optim.AdamW(model.parameters(), fused=True, **adamw(a))
    fwd = torch.compile(model) if compiled else model
    losses, times = [], []
    torch.cuda.reset_peak_memory_stats()
    for s in range(steps):
        ids, lab = windows(toks, s, a.batch, a.seq)
        x = torch.from_numpy(ids).cuda()
        y = torch.from_numpy(lab).cuda()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16) if autocast else contextlib.nullcontext():
            logits = fwd(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        if a.clip_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip_grad_norm)
        for grp in opt.param_groups:
            grp["lr"] = lr_at(a, s)
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    peak = torch.cuda.max_memory_allocated()
    skip = min(10, steps - 1)
    tps = a.batch * a.seq * (steps - skip) / sum(times[skip:])
    return losses, tps, peak


def make(a):
    import torch
    import make_zoo
    os.makedirs(a.out, exist_ok=True)
    n = a.steps * a.batch * a.seq + a.seq + 1
    toks = token_stream(n)
    np.save(os.path.join(a.out, "tokens.npy"), toks)
    log = lambda m: print(m, flush=True)
    if not a.no_export:
        model = build(torch, make_zoo).eval()
        w = make_zoo.make_wrapper(model, "nanogpt", ["input_ids"]).eval()
        ids = torch.from_numpy(windows(toks, 0, a.batch, a.seq)[0])
        for exporter in ("dynamo", "torchscript"):
            path = os.path.join(a.out, f"gpt2_124m_{exporter}", "model.onnx")
            t0 = time.time()
            try:
                make_zoo.export(w, (ids,), ["input_ids"], "logits", path, exporter)
                log(f"exported {path}: {os.path.getsize(path) / 1e6:.1f} MB in {time.time() - t0:.0f} s")
            except Exception as e:  # reported; the other exporter still runs
                log(f"export {exporter} FAILED: {str(e).splitlines()[-1][:300] if str(e) else repr(e)}")
    res = {"batch": a.batch, "seq": a.seq, "steps": a.steps,
           "adamw": {**adamw(a), "betas": [a.beta1, a.beta2]},
           "warmup_steps": a.warmup_steps, "clip_grad_norm": a.clip_grad_norm}
    losses, tps, peak = train(torch, build(torch, make_zoo), toks, a, a.steps, False)
    np.save(os.path.join(a.out, "torch_losses.npy"), np.array(losses, np.float64))
    res["eager"] = {"tokens_per_s": tps, "peak_bytes": peak, "loss_first": losses[0], "loss_last": losses[-1]}
    log(f"torch eager: {tps / 1e3:.1f}k tokens/s, peak {peak / 2**30:.2f} GiB, loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    if a.repeat_ref:
        # the same eager bf16 run again: PyTorch against itself (cuBLAS and
        # the fused AdamW are not bitwise repeatable run to run)
        l2, _, _ = train(torch, build(torch, make_zoo), toks, a, a.steps, False)
        np.save(os.path.join(a.out, "torch_losses_repeat.npy"), np.array(l2, np.float64))
        log(f"torch eager again: loss {l2[0]:.4f} -> {l2[-1]:.4f}")
    if a.fp32_ref:
        # PyTorch's own spread: the same steps without autocast (fp32, TF32
        # off). A bf16 curve that differs from this one by X% bounds how
        # closely any bf16 implementation can be asked to follow another.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        l32, tps32, _ = train(torch, build(torch, make_zoo), toks, a, a.steps, False, autocast=False)
        np.save(os.path.join(a.out, "torch_losses_fp32.npy"), np.array(l32, np.float64))
        res["eager_fp32"] = {"tokens_per_s": tps32, "loss_first": l32[0], "loss_last": l32[-1]}
        log(f"torch eager fp32: {tps32 / 1e3:.1f}k tokens/s, loss {l32[0]:.4f} -> {l32[-1]:.4f}")
    if not a.no_compile:
        _, tps_c, peak_c = train(torch, build(torch, make_zoo), toks, a, a.compile_steps, True)
        res["compile"] = {"tokens_per_s": tps_c, "peak_bytes": peak_c}
        log(f"torch compile: {tps_c / 1e3:.1f}k tokens/s, peak {peak_c / 2**30:.2f} GiB")
    with open(os.path.join(a.out, "torch.json"), "w") as f:
        json.dump(res, f, indent=1)


def compare(d):
    t = json.load(open(os.path.join(d, "torch.json")))
    ref = np.load(os.path.join(d, "torch_losses.npy"))
    eager = t["eager"]["tokens_per_s"]
    comp = t.get("compile", {}).get("tokens_per_s")
    print(f"{'run':34s} {'tokens/s':>10s} {'x eager':>8s} {'x compile':>9s} {'worst loss diff':>16s}")
    print(f"{'torch eager (bf16 autocast)':34s} {eager:10.0f} {1.0:8.2f} {eager / comp if comp else float('nan'):9.2f}")
    if comp:
        print(f"{'torch.compile':34s} {comp:10.0f} {comp / eager:8.2f} {1.0:9.2f}")
    curves = []
    ref32 = None
    p32 = os.path.join(d, "torch_losses_fp32.npy")
    if os.path.exists(p32):
        ref32 = np.load(p32)
        n = min(len(ref32), len(ref))
        rel = np.abs(ref32[:n] - ref[:n]) / np.abs(ref[:n])
        k = np.arange(0, n, 10)
        print(f"{'torch fp32 vs torch bf16 autocast':34s} {'':10s} {'':8s} {'':9s} {100 * np.max(rel[k]):15.2f}%")
        curves.append(("torch_fp32", ref32))
    prep = os.path.join(d, "torch_losses_repeat.npy")
    if os.path.exists(prep):
        rr = np.load(prep)
        n = min(len(rr), len(ref))
        k = np.arange(0, n, 10)
        print(f"{'torch eager run twice':34s} {'':10s} {'':8s} {'':9s} "
              f"{100 * np.max(np.abs(rr[k] - ref[k]) / np.abs(ref[k])):15.2f}%")
        curves.append(("torch_again", rr))
    for f in sorted(glob.glob(os.path.join(d, "teexec_*.json"))):
        try:
            r = json.load(open(f))
        except ValueError:
            print(f"{os.path.basename(f):34s} (no result)")
            continue
        tps = r.get("tokens_per_s", 0.0)
        got = np.array(r["losses"], np.float64)
        # an fp32 teexec run is held to PyTorch's fp32 curve, bf16 to bf16
        ref = ref32 if ("fp32" in f and ref32 is not None) else np.load(os.path.join(d, "torch_losses.npy"))
        k = np.arange(0, min(len(got), len(ref)), 10)
        worst = float(np.max(np.abs(got[k] - ref[k]) / np.abs(ref[k]))) if len(k) else float("nan")
        print(f"{os.path.basename(f)[7:-5]:34s} {tps:10.0f} {tps / eager:8.2f} "
              f"{tps / comp if comp else float('nan'):9.2f} {100 * worst:15.2f}%")
        rel = np.abs(got[:len(ref)] - ref[:len(got)]) / np.abs(ref[:len(got)])
        over = np.nonzero(rel > 0.01)[0]
        curves.append((os.path.basename(f)[7:-5], got))
        print(f"{'':34s} first step over 1%: {int(over[0]) if len(over) else 'none'}")
    # the curves themselves, every 20th step: where they part shows what to look for
    ref = np.load(os.path.join(d, "torch_losses.npy"))
    if curves:
        print(f"{'step':>6s} {'torch':>9s} " + " ".join(f"{n[:20]:>20s}" for n, _ in curves))
        for i in range(0, len(ref), 20):
            print(f"{i:6d} {ref[i]:9.4f} " + " ".join(
                f"{g[i]:20.4f}" if i < len(g) else f"{'-':>20s}" for _, g in curves))
    print(f"torch eager peak device memory: {t['eager']['peak_bytes'] / 2**30:.2f} GiB (max_memory_allocated)")
    for f in sorted(glob.glob(os.path.join(d, "teexec_*.json"))):
        try:
            r = json.load(open(f))
        except ValueError:
            continue
        if r.get("device_bytes"):
            print(f"teexec {os.path.basename(f)[7:-5]} device memory: {r['device_bytes'] / 2**30:.2f} GiB "
                  f"(teexec_trainer_device_bytes: what the trainer allocated)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    ap.add_argument("--compare")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--compile-steps", type=int, default=40)
    ap.add_argument("--warmup-steps", type=int, default=0,
                    help="linear lr warmup over N steps (teexec train --warmup-steps)")
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--clip-grad-norm", type=float, default=0.0,
                    help="clip_grad_norm_ to this global norm (teexec train --clip-grad-norm)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--no-export", action="store_true")
    ap.add_argument("--repeat-ref", action="store_true",
                    help="run the eager bf16 reference twice: torch_losses_repeat.npy")
    ap.add_argument("--fp32-ref", action="store_true",
                    help="also train without autocast (fp32, no TF32): torch_losses_fp32.npy")
    a = ap.parse_args()
    if a.compare:
        compare(a.compare)
    elif a.out:
        make(a)
    else:
        ap.error("--out DIR or --compare DIR")


if __name__ == "__main__":
    main()
