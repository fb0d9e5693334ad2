#!/usr/bin/env python3
"""te_coverage.py - how much of each zoo export teexec's lowering puts in
te.ops (a developer's table, next to zoo_status.py).

    python3 tests/zoo/te_coverage.py [--teexec build/rel/tools/teexec] [--only NAME...] [-v]

Per export: the share of the export's FLOPs (its MatMul / Gemm / Conv /
Attention nodes, shapes from ONNX shape inference of the original) that
are no longer standard ops in `teexec plan --json` (lowered into te.ops),
the attention blocks lowered, and the lowering's notes by pattern; with -v
the declined patterns with their reasons and the products left standard.
Exports the planner does not plan yet say why. Needs Debian's python3-onnx
and python3-numpy.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import shape_inference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def static_shapes(m):
    try:
        m = shape_inference.infer_shapes(m, strict_mode=False)
    except Exception:  # newer ops than this onnx knows: declared shapes only
        pass
    d = {}
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            d[vi.name] = [x.dim_value if x.HasField("dim_value") else -1 for x in t.shape.dim]
    for i in m.graph.initializer:
        d[i.name] = list(i.dims)
    return d


def attr(n, name, default):
    for a in n.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def flops(n, sh):
    """Multiply-adds x 2 of one product node; None when its shapes are unknown."""
    s = [sh.get(v) for v in n.input]
    out = sh.get(n.output[0]) if n.output else None
    known = lambda x: x is not None and -1 not in x
    if n.op_type == "MatMul":
        if not known(s[0]) or not known(out):
            return None
        return 2 * int(np.prod(out)) * s[0][-1]
    if n.op_type == "Gemm":
        if not known(s[0]) or not known(s[1]):
            return None
        m_, k = (s[0][1], s[0][0]) if attr(n, "transA", 0) else (s[0][0], s[0][1])
        return 2 * m_ * k * (s[1][0] if attr(n, "transB", 0) else s[1][1])
    if n.op_type == "Conv":
        if not known(s[1]) or not known(out):
            return None
        return 2 * int(np.prod(out)) * int(np.prod(s[1][1:]))
    if n.op_type == "Attention":  # [b, h, s, d] operands
        if not known(s[0]) or not known(s[1]) or len(s[0]) != 4:
            return None
        b, h, sq, d = s[0]
        return 4 * b * h * sq * s[1][2] * d
    return 0


def coverage(teexec, folder):
    m = onnx.load(os.path.join(folder, "model.onnx"))
    sh = static_shapes(m)
    per_node = {}
    for n in m.graph.node:
        f = flops(n, sh)
        if f:
            per_node[n.name] = f
    total = sum(per_node.values())
    p = subprocess.run([teexec, "plan", os.path.join(folder, "model.onnx"), "--json"],
                       capture_output=True, text=True)
    if p.returncode:
        lines = [x for x in p.stderr.strip().splitlines() if x.strip()]
        return {"error": lines[-1] if lines else "plan failed"}
    d = json.loads(p.stdout)
    left = []
    for g in d["plan"]["groups"]:
        if g["kind"] != "standard":
            continue
        for o in g["ops"]:
            if o["op"] in ("MatMul", "Gemm", "Conv", "Attention", "Einsum"):
                left.append((o["node"], o["op"], per_node.get(o["node"])))
    outside = sum(f or 0 for _, _, f in left)
    lowered, declined = {}, []
    for x in d["lowering"]:
        if x["lowered"]:
            lowered[x["pattern"]] = lowered.get(x["pattern"], 0) + 1
        else:
            declined.append((x["pattern"], x["node"], x.get("reason", "")))
    return {"share": 1 - outside / total if total else 1.0, "lowered": lowered,
            "declined": declined, "left": left}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--teexec", default=os.path.join(ROOT, "build", "rel", "tools", "teexec"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    folders = sorted(f for f in glob.glob(os.path.join(ROOT, "models", "zoo", "*"))
                     if os.path.isfile(os.path.join(f, "meta.json")))
    if a.only:
        folders = [f for f in folders if any(os.path.basename(f).startswith(o) for o in a.only)]
    for f in folders:
        name = os.path.basename(f)
        r = coverage(a.teexec, f)
        if "error" in r:
            print(f"{name:24s} | not planned: {r['error'][:150]}")
            continue
        low = r["lowered"]
        print(f"{name:24s} | te.ops FLOPs {100 * r['share']:5.1f}% | attention "
              f"{low.get('DotProductAttention', 0)} | " +
              " ".join(f"{k} {v}" for k, v in sorted(low.items()) if k != "DotProductAttention"))
        if a.v:
            for p_, n_, why in r["declined"]:
                print(f"    declined {p_} at {n_}: {why}")
            for n_, op, fl in r["left"]:
                print(f"    standard {op} {n_}" + (f" ({fl} FLOPs)" if fl else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
