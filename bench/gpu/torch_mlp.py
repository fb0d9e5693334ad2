#!/usr/bin/env python3
"""PyTorch side of bench/gpu/run_mlp_bench.sh (runs on the GPU machine).

    python3 bench/gpu/torch_mlp.py --hidden 4096 --ffn 16384 --tokens 8192 --onnx OUT.onnx

1. Builds the MLP block of the benchmark (x + fc2(gelu_tanh(fc1(layernorm(x))))),
   seeded weights, and writes it as ONNX with exactly PyTorch 1.13's export
   structure: models/mlp_tanh/model.onnx (an export of the same module at
   hidden 64) is the template, its initializers replaced by this module's
   weights and its input shape set to [1, tokens, hidden]. teexec times that
   file; both sides run the same weights.
2. Times PyTorch eager and torch.compile (bf16 autocast-free: the module is
   cast to bf16) for inference (no_grad forward) and a training step
   (forward, MSE loss against a fixed target, backward to the parameters,
   fused AdamW update and zero_grad: the work `teexec bench --train` does),
   median of --iters after warm-up, CUDA events. Prints one line per measurement:
   "torch <eager|compile> <inference|train_step> ms=<median> tflops=<x>".
"""
import argparse
import copy
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class MLP(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x)), approximate="tanh"))


def write_onnx(m, tokens, hidden, path):
    tpl = onnx.load(os.path.join(ROOT, "models", "mlp_tanh", "model.onnx"))
    g = tpl.graph
    # MatMul weights are the transposed Linear weights, as the exporter writes them
    matmuls = [n.input[1] for n in g.node if n.op_type == "MatMul"]
    values = {
        "ln.weight": m.ln.weight, "ln.bias": m.ln.bias,
        "fc1.bias": m.fc1.bias, "fc2.bias": m.fc2.bias,
        matmuls[0]: m.fc1.weight.t(), matmuls[1]: m.fc2.weight.t(),
    }
    new_inits = []
    for init in g.initializer:
        arr = values[init.name].detach().float().cpu().contiguous().numpy()
        new_inits.append(onnx.numpy_helper.from_array(arr, init.name))
    del g.initializer[:]
    g.initializer.extend(new_inits)
    del g.value_info[:]
    for v in list(g.input) + list(g.output):
        dims = v.type.tensor_type.shape.dim
        dims[0].dim_value, dims[1].dim_value, dims[2].dim_value = 1, tokens, hidden
    onnx.save(tpl, path)


def time_ms(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--ffn", type=int, default=16384)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--onnx", help="write the model here")
    ap.add_argument("--infer-only", action="store_true")
    ap.add_argument("--autocast", action="store_true",
                    help="also time the training step of the FP32 module under bf16 autocast "
                         "(FP32 master weights, as teexec keeps them)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--check-dir", help="write x.npy / y.npy (float32 reference) here")
    ap.add_argument("--compare", nargs=2, metavar=("REF", "GOT"),
                    help="print the relative L2 error of the .npy GOT against REF and exit")
    args = ap.parse_args()
    if args.compare:
        ref = np.load(args.compare[0]).astype(np.float64)
        got = np.load(args.compare[1]).astype(np.float64)
        if ref.shape != got.shape:
            print("compare: shapes differ: %s vs %s" % (ref.shape, got.shape))
            sys.exit(1)
        print("rel_l2=%.3e" % (np.linalg.norm(got - ref) / np.linalg.norm(ref)))
        return
    torch.manual_seed(0)
    m = MLP(args.hidden, args.ffn)
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(1.0)
    if args.onnx:
        write_onnx(m, args.tokens, args.hidden, args.onnx)
    dev = torch.device("cuda")
    if args.check_dir:
        # teexec's numbers are checked against the float32 module's output
        # on an input of the model's shape (run_mlp_bench.sh: teexec run
        # --input x=x.npy --output-dir, then --compare)
        g = torch.Generator().manual_seed(1)
        xc = torch.randn(1, args.tokens, args.hidden, generator=g)
        with torch.no_grad():
            yc = m.to(dev)(xc.to(dev)).cpu()
        np.save(os.path.join(args.check_dir, "x.npy"), xc.numpy())
        np.save(os.path.join(args.check_dir, "y.npy"), yc.numpy())
    # like-for-like with teexec's trainer, which keeps FP32 master weights
    # under --dtype bf16: the FP32 module under bf16 autocast
    m32 = copy.deepcopy(m).to(dev) if args.autocast and not args.infer_only else None
    m = m.to(dev, torch.bfloat16)
    flops = 2.0 * args.tokens * args.hidden * args.ffn * 2
    x = torch.randn(1, args.tokens, args.hidden, device=dev, dtype=torch.bfloat16)
    dy = torch.randn_like(x)
    kinds = [("eager", m)]
    if not args.no_compile:
        kinds.append(("compile", torch.compile(m)))
    for name, mod in kinds:
        def infer():
            with torch.no_grad():
                mod(x)
        ms = time_ms(infer, args.iters)
        print(f"torch {name} inference ms={ms:.4f} tflops={flops / (ms * 1e-3) / 1e12:.1f}", flush=True)
        if args.infer_only:
            continue
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01, fused=True)

        def step():
            loss = F.mse_loss(mod(x), dy)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        ms = time_ms(step, args.iters)
        print(f"torch {name} train_step ms={ms:.4f} tflops={3 * flops / (ms * 1e-3) / 1e12:.1f}", flush=True)
    if m32 is not None:
        opt32 = torch.optim.AdamW(m32.parameters(), lr=1e-3, weight_decay=0.01, fused=True)

        def step32():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.mse_loss(m32(x), dy)
            loss.backward()
            opt32.step()
            opt32.zero_grad(set_to_none=True)
        ms = time_ms(step32, args.iters)
        print(f"torch eager-autocast train_step ms={ms:.4f} tflops={3 * flops / (ms * 1e-3) / 1e12:.1f}",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
