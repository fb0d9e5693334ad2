#!/usr/bin/env python3
"""PyTorch side of bench/gpu/run_gpt2_bench.sh (runs on the GPU machine).

    python3 bench/gpu/torch_gpt2.py --onnx OUT/gpt2.onnx --results OUT/torch.json
    python3 bench/gpu/torch_gpt2.py --summarize OUT

1. Builds a GPT-2 style pre-LN transformer block (defaults: hidden 2048, 16
   heads, FFN 4 x hidden): LayerNorm, QKV Linear+bias, causal scaled dot
   product attention, projection Linear+bias, residual, LayerNorm, fc1
   Linear+bias, GELU (tanh), fc2 Linear+bias, residual. Weights come from a
   fixed seed (float32, on the CPU).
2. With --onnx, writes the same block with the same weights as an ONNX model
   in teexec's te.ops domain, node for node as models/make_te_models.py
   writes te_gpt2_block (MakeExtraOutput / LayerNorm / Linear / Bias / ONNX
   Split / Reshape / DotProductAttention / AddExtraInput / GELU), input x
   float32 [batch, seq, hidden], output y. te.ops Linear weights are
   [out, in] like nn.Linear's, so they are copied as they are.
3. Times training steps in PyTorch eager and torch.compile: zero_grad,
   forward in bf16, MSE loss against a fixed random target, backward, AdamW
   (lr 1e-3, weight decay 0.01: teexec's defaults; fused=True, PyTorch's
   fastest AdamW, unless --foreach-adamw). Default precision is
   autocast (FP32 master weights, bf16 compute), as teexec's trainer keeps
   FP32 master copies under --dtype bf16; --pure-bf16 casts the module to
   bf16 instead. Each step is timed with the wall clock around the call
   followed by torch.cuda.synchronize(), as `teexec bench` times its calls.
   Prints "torch <eager|compile> train_step ms=<median> min=<min>
   tflops=<x>" and writes all numbers to --results (JSON).
4. --summarize DIR reads DIR/torch.json, DIR/teexec_*.json (`teexec bench
   --json`) and DIR/gemm_rate.txt and prints one table: median ms, TFLOP/s,
   speed relative to eager and compile, and the share of cuBLASLt's bf16
   GEMM rate at the block's GEMM shapes.

FLOPs per training step: 3 x forward (backward = 2 x forward), forward =
GEMMs 2*T*(3H*H + H*H + 2*H*F) + attention 4*B*S*S*H / 2 (causal: half of
the S x S scores), T = B*S tokens.
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys
import time


def flops_per_step(b, s, h, f):
    t = b * s
    gemm = 2.0 * t * (3 * h * h + h * h + 2 * h * f)
    attn = 4.0 * b * s * s * h / 2
    return 3 * gemm, 3 * attn


def gemm_shapes(b, s, h, f):
    """The forward GEMMs of the block as gemm_rate's M x N x K."""
    t = b * s
    return [(t, 3 * h, h), (t, h, h), (t, f, h), (t, h, f)]


# ---------------------------------------------------------------------------
# the block (PyTorch) and its te.ops ONNX form
# ---------------------------------------------------------------------------

def make_block(h, nh, f):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.nh = nh
            self.ln1 = nn.LayerNorm(h, eps=1e-5)
            self.qkv = nn.Linear(h, 3 * h)
            self.proj = nn.Linear(h, h)
            self.ln2 = nn.LayerNorm(h, eps=1e-5)
            self.fc1 = nn.Linear(h, f)
            self.fc2 = nn.Linear(f, h)

        def forward(self, x):
            b, s, hh = x.shape
            d = hh // self.nh
            q, k, v = self.qkv(self.ln1(x)).split(hh, dim=-1)
            q, k, v = (t.reshape(b, s, self.nh, d).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, hh))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    m = Block()
    with torch.no_grad():
        # LayerNorm affine parameters away from 1 / 0, so a model that
        # ignored them would not pass for this one
        for ln in (m.ln1, m.ln2):
            ln.weight.copy_(1.0 + 0.1 * torch.randn(h))
            ln.bias.copy_(0.1 * torch.randn(h))
    return m


def write_te_onnx(m, b, s, h, nh, path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    d = h // nh
    te = "te.ops"
    nodes = []
    count = [0]

    def node(op, inputs, n_out=1, domain=te, **attrs):
        count[0] += 1
        base = "%s_%d" % (op.lower(), count[0])
        outs = [base] if n_out == 1 else ["%s_%d" % (base, i) for i in range(n_out)]
        nodes.append(helper.make_node(op, inputs, outs, name=base, domain=domain, **attrs))
        return outs[0] if n_out == 1 else outs

    params = {
        "ln1_weight": m.ln1.weight, "ln1_bias": m.ln1.bias,
        "qkv_weight": m.qkv.weight, "qkv_bias": m.qkv.bias,
        "proj_weight": m.proj.weight, "proj_bias": m.proj.bias,
        "ln2_weight": m.ln2.weight, "ln2_bias": m.ln2.bias,
        "fc1_weight": m.fc1.weight, "fc1_bias": m.fc1.bias,
        "fc2_weight": m.fc2.weight, "fc2_bias": m.fc2.bias,
    }
    inits = [numpy_helper.from_array(t.detach().float().cpu().contiguous().numpy(), n)
             for n, t in params.items()]
    inits.append(numpy_helper.from_array(np.array([h, h, h], dtype=np.int64), "qkv_split"))

    x, res1 = node("MakeExtraOutput", ["x"], n_out=2)
    t = node("LayerNorm", [x, "ln1_weight", "ln1_bias"], eps=1e-5)
    t = node("Linear", [t, "qkv_weight"])
    t = node("Bias", [t, "qkv_bias"])
    q, k, v = node("Split", [t, "qkv_split"], n_out=3, domain="", axis=-1)
    q, k, v = (node("Reshape", [u], shape=[b, s, nh, d]) for u in (q, k, v))
    t = node("DotProductAttention", [q, k, v, ""], causal=1, num_attention_heads=nh,
             qkv_format="bshd")
    t = node("Linear", [t, "proj_weight"])
    t = node("Bias", [t, "proj_bias"])
    t = node("AddExtraInput", [t, res1])
    t, res2 = node("MakeExtraOutput", [t], n_out=2)
    t = node("LayerNorm", [t, "ln2_weight", "ln2_bias"], eps=1e-5)
    t = node("Linear", [t, "fc1_weight"])
    t = node("Bias", [t, "fc1_bias"])
    t = node("GELU", [t], approximate="tanh")
    t = node("Linear", [t, "fc2_weight"])
    t = node("Bias", [t, "fc2_bias"])
    node("AddExtraInput", [t, res2])
    nodes[-1].output[0] = "y"

    graph = helper.make_graph(
        nodes, "gpt2_block_bench",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, s, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [b, s, h])],
        initializer=inits)
    model = helper.make_model(graph, producer_name="bench/gpu/torch_gpt2.py", producer_version="1",
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid(te, 1)])
    model.ir_version = 8
    onnx.save(model, path)


# ---------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------

def time_steps(step, warmup, iters):
    import torch
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    first = (time.perf_counter() - t0) * 1e3  # compile time for torch.compile
    for _ in range(max(warmup - 1, 0)):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return {"first_ms": first, "median_ms": statistics.median(times), "min_ms": min(times),
            "mean_ms": statistics.fmean(times), "times_ms": times}


def bench_torch(args):
    import copy

    import torch
    import torch.nn.functional as F

    torch.manual_seed(args.seed)
    h, f = args.hidden, args.ffn or 4 * args.hidden
    m = make_block(h, args.heads, f)
    if args.onnx:
        t0 = time.perf_counter()
        write_te_onnx(m, args.batch, args.seq, h, args.heads, args.onnx)
        print("onnx written: %s (%.1f MB, %.1f s)" % (args.onnx, os.path.getsize(args.onnx) / 1e6,
                                                       time.perf_counter() - t0), flush=True)
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    g = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    x = torch.randn(args.batch, args.seq, h, generator=g).to(dev)
    target = torch.randn(args.batch, args.seq, h, generator=g).to(dev)
    pure = args.pure_bf16
    if pure:
        x, target = x.bfloat16(), target.bfloat16()
    gemm_f, attn_f = flops_per_step(args.batch, args.seq, h, f)
    results = {
        "config": {"batch": args.batch, "seq": args.seq, "hidden": h, "heads": args.heads,
                   "ffn": f, "precision": "bf16" if pure else "autocast-bf16",
                   "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                   "iters": args.iters, "warmup": args.warmup},
        "flops_per_step": gemm_f + attn_f, "gemm_flops_per_step": gemm_f,
        "gemm_shapes": gemm_shapes(args.batch, args.seq, h, f),
        "torch": {},
    }
    kinds = ["eager"] + ([] if args.no_compile else ["compile"])
    for kind in kinds:
        mod = copy.deepcopy(m).to(dev)
        if pure:
            mod = mod.to(torch.bfloat16)
        opt = torch.optim.AdamW(mod.parameters(), lr=1e-3, weight_decay=0.01,
                                **({} if args.foreach_adamw else {"fused": True}))
        fwd = torch.compile(mod) if kind == "compile" else mod

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=not pure):
                y = fwd(x)
            loss = F.mse_loss(y.float(), target.float())
            loss.backward()
            opt.step()

        try:
            r = time_steps(step, args.warmup, args.iters)
        except Exception as e:  # torch.compile needs a working toolchain; report and go on
            print("torch %s train_step failed: %s" % (kind, str(e).splitlines()[0][:300]),
                  flush=True)
            continue
        r["tflops"] = results["flops_per_step"] / (r["median_ms"] * 1e-3) / 1e12
        results["torch"][kind] = r
        print("torch %s train_step ms=%.3f min=%.3f tflops=%.1f first_call_ms=%.0f"
              % (kind, r["median_ms"], r["min_ms"], r["tflops"], r["first_ms"]), flush=True)
        del opt, mod, fwd
        torch.cuda.empty_cache()
    if args.results:
        with open(args.results, "w") as fh:
            json.dump(results, fh, indent=1)


# ---------------------------------------------------------------------------
# the summary table
# ---------------------------------------------------------------------------

GEMM_LINE = re.compile(r"^bf16 TN fp32-accumulate\s+(\d+)x\s*(\d+)x\s*(\d+)\s+([0-9.]+) ms")


def gemm_rate_of(path, shapes):
    """cuBLASLt bf16 TFLOP/s over the block's GEMM shapes (total FLOPs over
    total time), or None when gemm_rate did not measure them all."""
    if not os.path.exists(path):
        return None
    ms = {}
    with open(path) as fh:
        for line in fh:
            mm = GEMM_LINE.match(line)
            if mm:
                ms[tuple(int(v) for v in mm.groups()[:3])] = float(mm.group(4))
    if not all(tuple(s) in ms for s in shapes):
        return None
    fl = sum(2.0 * a * b * c for a, b, c in shapes)
    return fl / (sum(ms[tuple(s)] for s in shapes) * 1e-3) / 1e12


def summarize(out_dir):
    with open(os.path.join(out_dir, "torch.json")) as fh:
        tr = json.load(fh)
    c = tr["config"]
    fl = tr["flops_per_step"]
    rows = [("torch " + k, v["median_ms"], v["min_ms"]) for k, v in tr["torch"].items()]
    for p in sorted(glob.glob(os.path.join(out_dir, "teexec_*.json"))):
        try:
            with open(p) as fh:
                tj = json.load(fh)
        except (OSError, ValueError):
            print("(%s: no result)" % os.path.basename(p))
            continue
        name = "teexec %s %s%s" % (tj.get("device", "?"), tj.get("recipe", "none"),
                                   "" if tj.get("cuda_graphs") else " no-graphs")
        rows.append((name, tj["median_ms"], tj["min_ms"]))
    eager = tr["torch"].get("eager", {}).get("median_ms")
    comp = tr["torch"].get("compile", {}).get("median_ms")
    print("GPT-2 block training step (%s, batch %d x seq %d, hidden %d, %d heads, ffn %d), "
          "MSE + AdamW: %.3f TFLOP per step; %s, torch %s"
          % (c["precision"], c["batch"], c["seq"], c["hidden"], c["heads"], c["ffn"], fl / 1e12,
             c["device"], c["torch"]))
    gr = gemm_rate_of(os.path.join(out_dir, "gemm_rate.txt"), tr["gemm_shapes"])
    print("%-32s %10s %10s %9s %9s %10s %9s" % ("run", "median ms", "min ms", "TFLOP/s",
                                                "x eager", "x compile", "of GEMM"))
    for name, med, mn in rows:
        tf = fl / (med * 1e-3) / 1e12
        print("%-32s %10.3f %10.3f %9.1f %9s %10s %9s"
              % (name, med, mn, tf,
                 "%.2fx" % (eager / med) if eager else "-",
                 "%.2fx" % (comp / med) if comp else "-",
                 "%.0f%%" % (100 * tf / gr) if gr else "-"))
    if gr:
        print("cuBLASLt bf16 GEMM rate at the block's GEMM shapes (%s): %.1f TFLOP/s"
              % (", ".join("%dx%dx%d" % tuple(s) for s in tr["gemm_shapes"]), gr))
    else:
        print("cuBLASLt bf16 GEMM rate: not measured (no gemm_rate.txt with the block's shapes)")
    print("x eager / x compile: that run's speed relative to PyTorch's (median ms ratio, "
          ">1 = faster)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=0, help="default 4 x hidden")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--onnx", help="write the block as a te.ops ONNX model here")
    ap.add_argument("--results", help="write the timings here (JSON)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--pure-bf16", action="store_true",
                    help="module, input and target in bf16 (default: autocast, FP32 weights)")
    ap.add_argument("--foreach-adamw", action="store_true",
                    help="torch.optim.AdamW's foreach implementation (default: fused=True)")
    ap.add_argument("--gemm-shapes", action="store_true",
                    help="print the block's GEMM shapes as gemm_rate --shape arguments and exit")
    ap.add_argument("--summarize", metavar="DIR", help="print the table of a finished run")
    args = ap.parse_args()
    if args.gemm_shapes:
        f = args.ffn or 4 * args.hidden
        print(" ".join("--shape %dx%dx%d" % s
                       for s in gemm_shapes(args.batch, args.seq, args.hidden, f)))
        return 0
    if args.summarize:
        summarize(args.summarize)
        return 0
    bench_torch(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
