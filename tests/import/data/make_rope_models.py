#!/usr/bin/python3
"""Tiny rotary-embedding models, exported by PyTorch 1.13 at opset 17, for
tests/import/test_lower_rope.c (the RoPE lowering pass, import/lower_rope.c).

Each model: x [2, 8, 16] -> q (and k) projections (Linear, no bias: MatMul
initializers whose gradients the test compares) -> reshaped to 2 heads of 8
-> rotary embedding written as torch code (x*cos + rotate_half(x)*sin) in
one of the forms models write it -> y. Written next to this script:
rope_<name>.onnx, rope_<name>.x.npy (input), rope_<name>.y.npy (PyTorch's
output); the negative cases (neg_*) are only lowered, never run, so they
have no data. Deterministic (fixed seeds); run with /usr/bin/python3.
"""
import io
import os

import numpy as np
import onnx
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
B, S, HID, H = 2, 8, 16, 2
D = HID // H
MAXPOS = 12  # the tables hold more positions than the sequence: sliced


def rotate_half(x, neg="neg"):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    if neg == "swapped":  # not a rotation: the halves stay in place
        return torch.cat((-x1, x2), dim=-1)
    return torch.cat((-x2 if neg == "neg" else x2 * -1.0, x1), dim=-1)


class Rope(nn.Module):
    """layout: 'bhsd' (q.transpose(1, 2) first, tables [s, d]), 'bshd'
    (tables [s, 1, d]), 'gather' (Llama-HF style: tables indexed by a
    position-id buffer, unsqueezed to [1, 1, s, d]). table: 'std' (cos/sin
    of pos * base^(-2i/d)), 'scaled' (cos and sin times 0.5: not one angle),
    'partial' (a rotation of the first half of the head only: a full
    rotation of that slice), 'sin_input' (sin is a graph input). neg:
    'neg' (-x2), 'mul' (x2 * -1), 'swapped' (-x1, x2: not rotate_half)."""

    def __init__(self, layout="bhsd", table="std", neg="neg", with_k=False, base=10000.0):
        super().__init__()
        self.layout, self.table, self.neg, self.with_k = layout, table, neg, with_k
        self.q = nn.Linear(HID, HID, bias=False)
        self.k = nn.Linear(HID, HID, bias=False) if with_k else None
        r = D // 2 if table == "partial" else D
        inv = 1.0 / (base ** (torch.arange(0, r, 2, dtype=torch.float32) / r))
        ang = torch.outer(torch.arange(MAXPOS, dtype=torch.float32), inv)
        ang = torch.cat((ang, ang), dim=-1)
        scale = 0.5 if table == "scaled" else 1.0
        self.register_buffer("cos", ang.cos() * scale, persistent=False)
        self.register_buffer("sin", ang.sin() * scale, persistent=False)
        self.register_buffer("pos", torch.arange(MAXPOS)[None, :], persistent=False)

    def rope(self, x, t, sin=None):
        if self.layout == "bhsd":
            c, s = self.cos[:t], self.sin[:t]
        elif self.layout == "bshd":
            c, s = self.cos[:t, None, :], self.sin[:t, None, :]
        else:
            ids = self.pos[:, :t]
            c, s = self.cos[ids].unsqueeze(1), self.sin[ids].unsqueeze(1)
        if sin is not None:
            s = sin
        if self.table == "partial":
            r = D // 2
            xr, xp = x[..., :r], x[..., r:]
            return torch.cat((xr * c + rotate_half(xr, self.neg) * s, xp), dim=-1)
        return x * c + rotate_half(x, self.neg) * s

    def forward(self, x, sin=None):
        b, t, _ = x.shape

        def heads(p):
            y = p(x).reshape(b, t, H, D)
            return y if self.layout == "bshd" else y.transpose(1, 2)

        q = self.rope(heads(self.q), t, sin)
        if self.with_k:
            q = q * self.rope(heads(self.k), t, sin)
        if self.layout != "bshd":
            q = q.transpose(1, 2)
        return q.reshape(b, t, HID)


CASES = [
    ("bhsd_qk", dict(layout="bhsd", with_k=True)),
    ("bshd_mulneg", dict(layout="bshd", neg="mul")),
    ("gather", dict(layout="gather")),
    ("partial", dict(table="partial")),
    ("neg_scaled", dict(table="scaled")),
    ("neg_swapped", dict(neg="swapped")),
    ("neg_sin_input", dict(table="sin_input")),
]


def main():
    for i, (name, kw) in enumerate(CASES):
        torch.manual_seed(100 + i)
        m = Rope(**kw).eval()
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(torch.randn(p.shape) * 0.3)
        x = torch.randn(B, S, HID)
        args, ins = (x,), ["x"]
        if kw.get("table") == "sin_input":
            args, ins = (x, m.sin[:S].clone()), ["x", "sin"]
        buf = io.BytesIO()
        # gather keeps its Gather/Unsqueeze chain (no folding) so the pass
        # has to evaluate the constant subgraph itself.
        torch.onnx.export(m, args, buf, opset_version=17, input_names=ins, output_names=["y"],
                          do_constant_folding=(name != "gather"))
        model = onnx.load_from_string(buf.getvalue())
        onnx.save(model, os.path.join(HERE, f"rope_{name}.onnx"))
        if not name.startswith("neg_"):
            with torch.no_grad():
                y = m(*args)
            np.save(os.path.join(HERE, f"rope_{name}.x.npy"), x.numpy())
            np.save(os.path.join(HERE, f"rope_{name}.y.npy"), y.numpy())
        print(name, [n.op_type for n in model.graph.node])


if __name__ == "__main__":
    main()
