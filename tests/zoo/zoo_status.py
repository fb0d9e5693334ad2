#!/usr/bin/env python3
"""zoo_status.py - where teexec stands on every export of models/zoo (a
developer's table; CI's checks are tests/zoo/test_zoo.c).

    python3 tests/zoo/zoo_status.py [--teexec build/rel/tools/teexec] [--only NAME...]
                                    [--train] [--steps N] [--device cpu|cuda]

Per export: `teexec run` against expected/ (rel-L2), `teexec plan --explain`
(DotProductAttention count), `teexec convert` and a run of the converted
model, and with --train one `teexec train` step at lr 0 whose gradients are
compared with expected/grads.npz (worst rel-L2 over the parameters, and how
many initializers teexec trains that PyTorch does not), then --steps AdamW
steps against expected/adamw_loss.npy. Needs numpy (Debian's python3-numpy).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rel_l2(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def sh(cmd, timeout=600):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def last_line(s):
    lines = [x for x in s.strip().splitlines() if x.strip()]
    return lines[-1][:160] if lines else ""


def status(teexec, folder, a, tmp):
    name = os.path.basename(folder.rstrip("/"))
    meta = json.load(open(os.path.join(folder, "meta.json")))
    model = os.path.join(folder, "model.onnx")
    ins = []
    for f in sorted(glob.glob(os.path.join(folder, "inputs", "*.npy"))):
        ins += ["--input", f"{os.path.basename(f)[:-4]}={f}"]
    out_name = list(meta["outputs"])[0]
    expected = np.load(os.path.join(folder, "expected", out_name + ".npy"))
    row = {"export": name}
    os.makedirs(os.path.join(tmp, name), exist_ok=True)

    od = os.path.join(tmp, name, "run")
    rc, o, e = sh([teexec, "run", model, "--device", a.device, *ins, "--output-dir", od])
    row["run"] = f"{rel_l2(np.load(os.path.join(od, out_name + '.npy')), expected):.1e}" if rc == 0 \
        else "FAIL " + last_line(e)

    rc, o, e = sh([teexec, "plan", model, "--json"])
    if rc == 0:
        try:
            doc = json.loads(o)
            notes = [n for n in doc.get("lowering", []) if n.get("pattern") == "DotProductAttention"]
            row["dpa"] = f"{sum(1 for n in notes if n.get('lowered'))}/{len(notes)}"
            cov = doc.get("coverage")
            if cov:
                row["te_flops"] = f"{100 * cov.get('flops_share', 0):.1f}%"
        except ValueError:
            row["dpa"] = "bad json"
    else:
        row["dpa"] = "FAIL " + last_line(e)

    conv = os.path.join(tmp, name, "conv.onnx")
    rc, o, e = sh([teexec, "convert", model, conv])
    if rc == 0:
        od2 = os.path.join(tmp, name, "run2")
        rc, o, e = sh([teexec, "run", conv, "--device", a.device, *ins, "--output-dir", od2])
        row["convert"] = f"{rel_l2(np.load(os.path.join(od2, out_name + '.npy')), expected):.1e}" \
            if rc == 0 else "RUN FAIL " + last_line(e)
    else:
        row["convert"] = "FAIL " + last_line(e)

    if a.train:
        loss = meta["loss"]
        gd = os.path.join(tmp, name, "grads")
        rc, o, e = sh([teexec, "train", model, "--device", a.device, "--data",
                       os.path.join(folder, "train.npz"), "--loss", loss, "--batch", "2",
                       "--steps", "1", "--lr", "0", "--weight-decay", "0", "--dump-grads", gd, "--json"])
        if rc != 0:
            row["grads"] = "FAIL " + last_line(e)
        else:
            ref = np.load(os.path.join(folder, "expected", "grads.npz"))
            # A gradient that is zero in exact arithmetic (a key bias under
            # softmax) is rounding noise in both: compare every gradient on
            # at least a thousandth of the average parameter's scale.
            total = np.sqrt(sum(float((ref[k].astype(np.float64) ** 2).sum()) for k in ref.files))
            floor = 1e-3 * total / np.sqrt(max(len(ref.files), 1))
            worst, worst_name, missing = 0.0, "", []
            for k in ref.files:
                f = os.path.join(gd, k.replace("/", "_") + ".npy")
                if not os.path.exists(f):
                    missing.append(k)
                    continue
                g = np.load(f)
                r = ref[k]
                if meta["params"].get(k, {}).get("how") == "broadcast" and g.shape[1:] == r.shape[1:]:
                    # trained as one tensor: every copy holds the whole gradient (PyTorch's sum)
                    r = np.broadcast_to(r, g.shape)
                d = float(np.linalg.norm(g.astype(np.float64) - r) / max(np.linalg.norm(r), floor)) \
                    if g.shape == r.shape else float("inf")
                if d > worst:
                    worst, worst_name = d, k
            extra = [os.path.basename(p)[:-4] for p in glob.glob(os.path.join(gd, "*.npy"))
                     if not p.endswith(".grad.npy")]
            extra = [x for x in extra if x not in {k.replace("/", "_") for k in ref.files}]
            row["grads"] = f"{worst:.1e} ({worst_name})" + (f" missing {len(missing)}" if missing else "") + \
                (f" extra {len(extra)}: {','.join(extra[:3])}" if extra else "")
        if a.steps:
            rc, o, e = sh([teexec, "train", model, "--device", a.device, "--data",
                           os.path.join(folder, "train.npz"), "--loss", loss, "--batch", "2",
                           "--steps", str(a.steps), "--json"])
            if rc != 0:
                row["adamw"] = "FAIL " + last_line(e)
            else:
                got = np.array(json.loads(o)["losses"], np.float64)
                ref = np.load(os.path.join(folder, "expected", "adamw_loss.npy"))[:len(got)]
                row["adamw"] = f"{np.max(np.abs(got - ref) / np.abs(ref)):.1e}"
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--teexec", default=os.path.join(ROOT, "build", "rel", "tools", "teexec"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    folders = sorted(d for d in glob.glob(os.path.join(ROOT, "models", "zoo", "*"))
                     if os.path.isfile(os.path.join(d, "meta.json")))
    if a.only:
        folders = [f for f in folders if any(os.path.basename(f).startswith(o) for o in a.only)]
    with tempfile.TemporaryDirectory() as tmp:
        for f in folders:
            row = status(a.teexec, f, a, tmp)
            print(" | ".join(f"{k} {v}" if k != "export" else f"{v:24s}" for k, v in row.items()),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
