#!/usr/bin/env python3
"""Times every zoo model on the GPU: teexec against PyTorch eager and
torch.compile, in one run, on the same weights (issue 15).

For each architecture of models/zoo/make_zoo.py (the same builders and
seeds, so the weights are the zoo's), for batch 1 and 8 (sequence 16, or
16x16 images):

  * PyTorch fp32 inference, eager and torch.compile, and one training step
    at batch 8 (forward, loss, backward, fused AdamW), eager and compiled;
  * the model exported by each exporter at that batch (the committed zoo
    exports are batch 2), then `teexec bench --device cuda` on it: inference
    at batch 1 and 8, and `--train --optimizer adamw` at batch 8 (the same
    losses: cross-entropy over the vocabulary for decoders, MSE otherwise).

Every figure is the median of --iters timed calls after --warmup untimed
ones, each call synchronized (PyTorch: torch.cuda.synchronize around a
perf_counter; teexec: its own wall-clock figure, which also synchronizes).
The export and torch.compile's first compilation happen in --jobs worker
processes first (they fill inductor's on-disk cache, so the timed process
only re-traces); the timing itself is one process, one model at a time.

    python3 bench/gpu/zoo_bench.py --teexec .carry/lead/teexec --work /tmp/zb --out $OUT
    python3 bench/gpu/zoo_bench.py ... --only gpt2 llama --no-compile

Writes OUT/zoo_bench.json (every figure) and prints a table; ratios are
PyTorch time / teexec time (above 1: teexec is faster).
"""
import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models", "zoo"))
import make_zoo as zoo  # noqa: E402

BATCHES = (1, 8)
TRAIN_BATCH = 8


def arch_jobs(only):
    """One entry per architecture (the exporters share its weights):
    (key, name, kind, build, seed, opset, exporters)."""
    seen = {}
    for name, kind, build, exporter, seed, opset, variant in zoo.plan(only):
        key = name + variant
        if key not in seen:
            seen[key] = [key, name, kind, build, seed, opset, []]
        seen[key][6].append(exporter)
    return [tuple(v) for v in seen.values()]


def build_wrapper(job, device, exporter="dynamo"):
    import torch
    key, name, kind, build, seed, opset, _ = job
    torch.manual_seed(seed)
    model = build()
    model.eval()
    zoo.distinct_weights(model, seed)
    rows = zoo.make_inputs(kind, seed + 1, max(BATCHES))
    if kind == "encoder":
        rows = zoo.encoder_inputs_for(name, rows)
    input_names = list(rows)
    ones_mask = exporter == "torchscript" and kind == "decoder"
    w = zoo.make_wrapper(model, kind, input_names, ones_mask).eval().to(device)
    return w, {k: v.to(device) for k, v in rows.items()}, input_names, kind


def job_named(key, only):
    """The job of architecture `key` (workers look their job up by name: the
    builders are closures, which do not pickle)."""
    return next(j for j in arch_jobs(only) if j[0] == key)


def export_all(args_tuple):
    """Worker: the exports of one architecture at every batch."""
    key, only, work = args_tuple
    job = job_named(key, only)
    import torch
    torch.set_num_threads(1)
    lines = []
    for exporter in job[6]:
        for b in BATCHES:
            path = os.path.join(work, f"{job[0]}_{exporter}_b{b}", "model.onnx")
            try:
                w, rows, names, kind = build_wrapper(job, "cpu", exporter)
                out = "logits" if kind in ("decoder", "nanogpt") else "last_hidden_state"
                a = tuple(rows[k][:b] for k in names)
                zoo.export(w, a, names, out, path, exporter, job[5])
                lines.append(f"exported {path}")
            except Exception as e:  # recorded, the others go on
                lines.append(f"export FAILED {job[0]} {exporter} b{b}: {str(e).strip()[-300:]}")
    return lines


def loss_fn(kind, out, target):
    import torch.nn.functional as F
    if kind in ("decoder", "nanogpt"):
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    return F.mse_loss(out, target)


def time_calls(fn, warmup, iters):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def torch_times(job, compiled, warmup, iters):
    """{"infer_b1": ms, "infer_b8": ms, "train_b8": ms} for eager or compiled."""
    import torch
    w, rows, names, kind = build_wrapper(job, "cuda")
    res = {}
    fwd = torch.compile(w) if compiled else w
    for b in BATCHES:
        a = tuple(rows[k][:b] for k in names)

        def infer():
            with torch.no_grad():
                fwd(*a)
        res[f"infer_b{b}"] = time_calls(infer, warmup, iters)
    w.train()
    a = tuple(rows[k][:TRAIN_BATCH] for k in names)
    with torch.no_grad():
        ref = w(*a)
    g = torch.Generator(device="cuda").manual_seed(7)
    if kind in ("decoder", "nanogpt"):
        target = torch.randint(0, ref.shape[-1], ref.shape[:-1], device="cuda", generator=g)
    else:
        target = torch.randn(ref.shape, device="cuda", generator=g)
    opt = torch.optim.AdamW(w.parameters(), lr=1e-4, fused=True)
    step_fwd = torch.compile(w) if compiled else w

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(kind, step_fwd(*a), target).backward()
        opt.step()
    res[f"train_b{TRAIN_BATCH}"] = time_calls(step, warmup, iters)
    return res


def warm_compile(args_tuple):
    """Worker: compiles once so the timed process finds inductor's cache."""
    key, only = args_tuple
    job = job_named(key, only)
    try:
        torch_times(job, True, 1, 1)
        return [f"compiled {job[0]}"]
    except Exception as e:
        return [f"compile warm-up FAILED {job[0]}: {str(e).strip()[-300:]}"]


def teexec_time(exe, model, train, kind, warmup, iters):
    cmd = [exe, "bench", model, "--device", "cuda", "--json", "--warmup", str(warmup),
           "--iters", str(iters)]
    if train:
        cmd += ["--train", "--optimizer", "adamw", "--loss",
                "cross-entropy" if kind in ("decoder", "nanogpt") else "mse"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"rc={p.returncode}: {p.stderr.strip()[-300:]}")
    return json.loads(p.stdout)["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teexec", required=True, help="the teexec tool")
    ap.add_argument("--work", required=True, help="folder for the exports")
    ap.add_argument("--out", required=True, help="folder for zoo_bench.json")
    ap.add_argument("--only", nargs="*", help="architectures (make_zoo.py names)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 4))
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    jobs = arch_jobs(a.only)
    t0 = time.time()
    ctx = mp.get_context("spawn")
    with ctx.Pool(a.jobs) as pool:
        for lines in pool.imap_unordered(export_all, [(j[0], a.only, a.work) for j in jobs]):
            for line in lines:
                if "FAILED" in line:
                    print(line, flush=True)
        print(f"exports done in {time.time() - t0:.0f} s", flush=True)
        if not a.no_compile:
            for lines in pool.imap_unordered(warm_compile, [(j[0], a.only) for j in jobs]):
                for line in lines:
                    if "FAILED" in line:
                        print(line, flush=True)
            print(f"compile warm-up done at {time.time() - t0:.0f} s", flush=True)

    results = []
    cols = [f"infer_b{b}" for b in BATCHES] + [f"train_b{TRAIN_BATCH}"]
    for job in jobs:
        r = {"arch": job[0], "torch_eager": {}, "torch_compile": {}, "teexec": {}, "errors": []}
        try:
            r["torch_eager"] = torch_times(job, False, a.warmup, a.iters)
        except Exception:
            r["errors"].append("eager: " + traceback.format_exc(limit=2)[-300:])
        if not a.no_compile:
            try:
                r["torch_compile"] = torch_times(job, True, a.warmup, a.iters)
            except Exception:
                r["errors"].append("compile: " + traceback.format_exc(limit=2)[-300:])
        kind = job[2]
        for exporter in job[6]:
            t = {}
            for c in cols:
                b = int(c.split("_b")[1])
                m = os.path.join(a.work, f"{job[0]}_{exporter}_b{b}", "model.onnx")
                if not os.path.exists(m):
                    continue
                try:
                    t[c] = teexec_time(a.teexec, m, c.startswith("train"), kind, a.warmup, a.iters)
                except Exception as e:
                    r["errors"].append(f"teexec {exporter} {c}: {e}")
            r["teexec"][exporter] = t
        results.append(r)
        print(f"timed {job[0]} at {time.time() - t0:.0f} s: " + json.dumps(
            {k: r[k] for k in ("torch_eager", "torch_compile", "teexec")}), flush=True)
        for e in r["errors"]:
            print("  " + e.replace("\n", " | "), flush=True)

    with open(os.path.join(a.out, "zoo_bench.json"), "w") as f:
        json.dump({"iters": a.iters, "warmup": a.warmup, "results": results}, f, indent=1)

    def ratio(p, t):
        return f"{p / t:5.2f}" if p and t else "   - "
    print()
    print("median ms; ratio = PyTorch / teexec (above 1: teexec faster)")
    print(f"{'export':26s} {'what':9s} {'teexec':>8s} {'eager':>8s} {'compile':>8s} "
          f"{'x eager':>7s} {'x comp':>7s}")
    for r in results:
        for exporter, t in r["teexec"].items():
            for c in cols:
                te = t.get(c)
                pe = r["torch_eager"].get(c)
                pc = r["torch_compile"].get(c)
                print(f"{r['arch'] + '_' + exporter:26s} {c:9s} "
                      f"{te if te else float('nan'):8.3f} {pe if pe else float('nan'):8.3f} "
                      f"{pc if pc else float('nan'):8.3f} {ratio(pe, te):>7s} {ratio(pc, te):>7s}")


if __name__ == "__main__":
    main()
