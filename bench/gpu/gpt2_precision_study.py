#!/usr/bin/env python3
"""How repeatable is a bf16 GPT-2 124M loss curve, and how much of the gap
between two bf16 implementations is their precision policy? (issue 15)

    python3 bench/gpu/gpt2_precision_study.py [--steps 200 --batch 8 --seq 1024]

PyTorch only, on the GPU machine, with the model, weights and token stream
of bench/gpu/torch_gpt2_124m.py. For each optimizer schedule it trains:

  autocast      bf16 autocast (the reference of run_gpt2_124m.sh)
  autocast2     the same run again: PyTorch against itself
  bf16store     teexec's --dtype bf16 policy written in PyTorch: a bf16 copy
                of the FP32 master weights runs forward and backward in bf16
                (bf16 embeddings, residual stream and norm outputs), the
                gradients go to the masters in FP32, fused AdamW on the masters
  fp32          no autocast, TF32 off

and prints, for each against `autocast`, the largest relative loss
difference over every 10th step (the figure run_gpt2_124m.sh reports).
Schedules: "const" (lr 6e-4 from step 0, betas 0.9/0.999: the bench as it
was), "nanogpt" (nanoGPT's: linear warmup, betas 0.9/0.95, gradient norm
clipped to 1.0), and "warmup" (the warmup alone).
"""
import argparse
import copy
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "models", "zoo"))

SCHEDULES = {
    "const": dict(warmup=0, betas=(0.9, 0.999), clip=0.0),
    "warmup": dict(warmup=20, betas=(0.9, 0.999), clip=0.0),
    "nanogpt": dict(warmup=20, betas=(0.9, 0.95), clip=1.0),
}
LR, EPS, DECAY = 6e-4, 1e-8, 0.01


def lr_at(step, warmup):
    return LR * (step + 1) / warmup if warmup and step < warmup else LR


def train(torch, g, make_zoo, toks, a, sched, mode):
    import torch.nn.functional as F
    master = g.build(torch, make_zoo).cuda().train()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    opt = torch.optim.AdamW(master.parameters(), lr=LR, betas=sched["betas"], eps=EPS,
                            weight_decay=DECAY, fused=True)
    work = copy.deepcopy(master).to(torch.bfloat16) if mode == "bf16store" else None
    losses = []
    t0 = time.time()
    for s in range(a.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(s, sched["warmup"])
        ids, lab = g.windows(toks, s, a.batch, a.seq)
        x = torch.from_numpy(ids).cuda()
        y = torch.from_numpy(lab).cuda()
        opt.zero_grad(set_to_none=True)
        if mode == "bf16store":
            with torch.no_grad():
                for pw, pm in zip(work.parameters(), master.parameters()):
                    pw.copy_(pm)
                    pw.grad = None
            logits = work(x)
        elif mode == "autocast" or mode == "autocast2":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = master(x)
        else:
            logits = master(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        if mode == "bf16store":
            for pw, pm in zip(work.parameters(), master.parameters()):
                pm.grad = pw.grad.float()
        if sched["clip"]:
            torch.nn.utils.clip_grad_norm_(master.parameters(), sched["clip"])
        opt.step()
        losses.append(loss.item())
    return np.array(losses), time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--schedules", default="const,nanogpt,warmup")
    ap.add_argument("--modes", default="autocast,autocast2,bf16store,fp32")
    ap.add_argument("--save", help="write every curve to this .npz")
    a = ap.parse_args()
    import torch
    import make_zoo
    import torch_gpt2_124m as g
    toks = g.token_stream(a.steps * a.batch * a.seq + a.seq + 1)
    curves = {}
    for sn in a.schedules.split(","):
        sched = SCHEDULES[sn]
        print(f"== schedule {sn}: {sched}", flush=True)
        for mode in a.modes.split(","):
            l, sec = train(torch, g, make_zoo, toks, a, sched, mode)
            curves[f"{sn}_{mode}"] = l
            print(f"  {mode:10s} {sec:6.1f} s  loss {l[0]:.4f} -> {l[-1]:.4f}", flush=True)
        ref = curves[f"{sn}_autocast"]
        k = np.arange(0, len(ref), 10)
        for mode in a.modes.split(","):
            if mode == "autocast":
                continue
            got = curves[f"{sn}_{mode}"]
            rel = np.abs(got[k] - ref[k]) / np.abs(ref[k])
            print(f"  {mode:10s} vs autocast: worst {100 * rel.max():.2f}% at step {k[rel.argmax()]}, "
                  f"mean {100 * rel.mean():.2f}%", flush=True)
        print(f"  {'step':>5s} " + " ".join(f"{m:>10s}" for m in a.modes.split(",")))
        for i in range(0, a.steps, 20):
            print(f"  {i:5d} " + " ".join(f"{curves[f'{sn}_{m}'][i]:10.4f}" for m in a.modes.split(",")))
    if a.save:
        np.savez(a.save, **curves)


if __name__ == "__main__":
    main()
