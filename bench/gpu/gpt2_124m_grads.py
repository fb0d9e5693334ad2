#!/usr/bin/env python3
"""Where does GPT-2 124M training part from PyTorch? One step's gradients.

    python3 bench/gpu/gpt2_124m_grads.py --teexec .carry/lead/teexec --out DIR
        [--batch 8 --seq 1024 --devices cuda,cpu --exporters dynamo,torchscript]

The 200-step curves of run_gpt2_124m.sh part from PyTorch's after ~20
steps, in fp32 as in bf16, while PyTorch's own fp32 and bf16 curves stay
within 0.3% of each other: something trains differently at this size that
the zoo's tiny models (which match PyTorch's one-step gradients to 1e-4)
do not show. This compares the first step's gradient of every initializer,
teexec (`teexec train --dtype fp32 --steps 1 --dump-grads`) against
PyTorch's autograd in fp32 with TF32 off, on the first window of the same
token stream, and prints each initializer's relative L2 error, worst
first. Mapping initializers to parameters (same, transposed, sliced rows)
is make_zoo.initializer_params'.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "models", "zoo"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--teexec", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--devices", default="cuda")
    ap.add_argument("--exporters", default="dynamo,torchscript")
    ap.add_argument("--timeout", type=int, default=200)
    a = ap.parse_args()
    import onnx
    import torch
    import torch.nn.functional as F
    import make_zoo
    import torch_gpt2_124m as g124
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(a.out, exist_ok=True)
    toks = g124.token_stream(a.batch * a.seq * 2 + a.seq + 1)
    np.save(os.path.join(a.out, "tokens.npy"), toks)
    ids, lab = g124.windows(toks, 0, a.batch, a.seq)

    model = g124.build(torch, make_zoo)
    wrapper = make_zoo.make_wrapper(model, "nanogpt", ["input_ids"])
    # PyTorch's gradients, fp32 on the GPU
    wrapper = wrapper.cuda().train()
    wrapper.zero_grad()
    logits = wrapper(torch.from_numpy(ids).cuda())
    loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), torch.from_numpy(lab).cuda().view(-1))
    loss.backward()
    ref = {n: p.grad.detach().cpu().numpy() for n, p in wrapper.named_parameters() if p.grad is not None}
    print(f"torch fp32 loss {loss.item():.6f}", flush=True)
    wrapper = wrapper.cpu().eval()

    for exporter in a.exporters.split(","):
        path = os.path.join(a.out, f"gpt2_124m_{exporter}", "model.onnx")
        try:
            make_zoo.export(wrapper, (torch.from_numpy(ids),), ["input_ids"], "logits", path, exporter)
        except Exception as e:
            print(f"{exporter}: export failed: {e}"[:300], flush=True)
            continue
        m = onnx.load(path)
        init_map = make_zoo.initializer_params(m, wrapper)
        shapes = {i.name: tuple(i.dims) for i in m.graph.initializer}
        del m
        for dev in a.devices.split(","):
            d = os.path.join(a.out, f"grads_{exporter}_{dev}")
            t0 = time.time()
            r = subprocess.run([a.teexec, "train", path, "--device", dev, "--dtype", "fp32",
                                "--data", os.path.join(a.out, "tokens.npy"), "--seq", str(a.seq),
                                "--batch", str(a.batch), "--steps", "1", "--lr", "6e-4",
                                "--dump-grads", d],
                               capture_output=True, text=True, timeout=a.timeout)
            print(f"\n== {exporter} on {dev}: rc={r.returncode} in {time.time() - t0:.0f} s "
                  f"{r.stdout.strip()[-200:]} {r.stderr.strip()[-300:]}", flush=True)
            if r.returncode != 0:
                continue
            rows = []
            for init, (pname, how) in init_map.items():
                f = os.path.join(d, init.replace("/", "_") + ".npy")
                if not os.path.exists(f):
                    rows.append((float("inf"), init, pname, how, "no gradient dumped"))
                    continue
                got = np.load(f).astype(np.float64)
                want = ref[pname].astype(np.float64)
                if how == "transposed":
                    want = want.T
                elif how == "rows":
                    want = want[:int(np.prod(shapes[init])) // int(np.prod(want.shape[1:]))].reshape(shapes[init])
                if got.shape != want.shape:
                    rows.append((float("inf"), init, pname, how, f"shape {got.shape} vs {want.shape}"))
                    continue
                err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
                ratio = np.linalg.norm(got) / max(np.linalg.norm(want), 1e-30)
                rows.append((err, init, pname, how, f"|g| ratio {ratio:.4f}"))
            rows.sort(key=lambda x: -x[0])
            for err, init, pname, how, note in rows[:25]:
                print(f"  {err:10.3e}  {init[:48]:48s} {pname[:40]:40s} {how:10s} {note}")
            print(f"  ... {len(rows)} initializers; median rel err {np.median([x[0] for x in rows]):.3e}")
            missing = sorted(set(ref) - {p for p, _ in init_map.values()})
            if missing:
                print(f"  parameters with no initializer: {missing}")


if __name__ == "__main__":
    main()
