#!/usr/bin/python3
"""Tiny attention models, exported by PyTorch 1.13 at opset 17, for
tests/import/test_lower_attention.c (the attention lowering pass).

Each model: x [2, 8, 16] -> q, k, v projections (Linear, no bias, so the
weights are MatMul initializers whose gradients the test compares) ->
attention in one of the forms PyTorch code writes it -> y. Written next to
this script: attn_<name>.onnx, attn_<name>.x.npy (input; .mask.npy too for the
explicit-mask model), attn_<name>.y.npy (PyTorch's output),
attn_<name>.target.npy (an MSE target for the training step); the
negative cases (neg_*) are only lowered, never run, so they have no data.
Deterministic (fixed seeds); run with /usr/bin/python3 from anywhere.
"""
import io
import math
import os

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
B, S, HID = 2, 8, 16


class Attn(nn.Module):
    """heads h, kv heads hk (GQA when hk < h); `scale_form` and `mask_form`
    choose how the exported graph writes the scale and the mask."""

    def __init__(self, h=2, hk=None, scale_form="mul_after", mask_form="none",
                 repeat_form="expand", proj=False, probs_out=False, dropout=False):
        super().__init__()
        hk = hk or h
        self.h, self.hk, self.d = h, hk, HID // h
        self.q = nn.Linear(HID, h * self.d, bias=False)
        self.k = nn.Linear(HID, hk * self.d, bias=False)
        self.v = nn.Linear(HID, hk * self.d, bias=False)
        self.o = nn.Linear(HID, HID, bias=False) if proj else None
        self.scale_form, self.mask_form, self.repeat_form = scale_form, mask_form, repeat_form
        self.probs_out, self.dropout = probs_out, dropout
        tril = torch.tril(torch.ones(S, S))
        # Buffers the way GPT-2 / older Llama code registers them (exported as
        # constants, sliced to the sequence length).
        self.register_buffer("tril_bool", tril.bool().view(1, 1, S, S))
        self.register_buffer("add_mask", torch.triu(torch.full((S, S), float("-inf")), 1))
        self.register_buffer("add_mask_big", torch.triu(torch.full((S, S), -1e9), 1))
        g = torch.Generator().manual_seed(7)
        rm = torch.zeros(S, S, dtype=torch.bool)
        rm[0, :] = True
        self.register_buffer("row_mask", rm)
        self.register_buffer("rand_mask", (torch.rand(S, S, generator=g) < 0.3)
                             & ~torch.eye(S, dtype=torch.bool))

    def repeat(self, t):
        n = self.h // self.hk
        if n == 1:
            return t
        b, hk, s, d = t.shape
        if self.repeat_form == "expand":
            return t[:, :, None, :, :].expand(b, hk, n, s, d).reshape(b, hk * n, s, d)
        return torch.repeat_interleave(t, n, dim=1)

    def forward(self, x, mask=None):
        b, t, c = x.shape
        d = self.d
        q = self.q(x).reshape(b, t, self.h, d).transpose(1, 2)
        k = self.k(x).reshape(b, t, self.hk, d).transpose(1, 2)
        v = self.v(x).reshape(b, t, self.hk, d).transpose(1, 2)
        k, v = self.repeat(k), self.repeat(v)
        sf = self.scale_form
        if sf == "q_before":
            q = q * (1.0 / math.sqrt(d))
        elif sf == "qk_before":
            q = q * d ** -0.25
            k = k * d ** -0.25
        att = q @ k.transpose(-2, -1)
        if sf == "mul_after":
            att = att * (1.0 / math.sqrt(d))
        elif sf == "div_after":
            att = att / math.sqrt(d)
        elif sf == "div_shape":
            # sqrt(d) from the tensor's shape, not folded by the tracer
            att = att / torch.sqrt(torch.tensor(q.shape[-1], dtype=torch.float32))
        mf = self.mask_form
        if mf == "trilu_shape_inf":
            causal = torch.tril(torch.ones_like(att[0, 0]))
            att = att.masked_fill(causal == 0, float("-inf"))
        elif mf == "buffer_where_1e4":
            att = torch.where(self.tril_bool[:, :, :t, :t], att, torch.tensor(-10000.0))
        elif mf == "add_inf":
            att = att + self.add_mask[:t, :t]
        elif mf == "add_big":
            att = att + self.add_mask_big[:t, :t]
        elif mf == "not_causal_const":
            att = att.masked_fill(self.rand_mask, float("-inf"))
        elif mf == "input":
            att = att.masked_fill(mask, float("-inf"))
        elif mf == "input_keep":
            att = torch.where(mask, att, torch.tensor(float("-inf")))
        elif mf == "computed":
            # depends on the data: neither constant nor a graph input
            att = att.masked_fill((x.sum(-1) < -1.0)[:, None, None, :], float("-inf"))
        elif mf == "row_masked":
            att = att.masked_fill(self.row_mask, float("-inf"))
        elif mf == "trilu_k1":
            causal = torch.tril(torch.ones_like(att[0, 0]), diagonal=1)
            att = att.masked_fill(causal == 0, float("-inf"))
        p = torch.softmax(att, dim=-1)
        if self.dropout:
            p = F.dropout(p, 0.1, training=True)
        y = (p @ v).transpose(1, 2).reshape(b, t, self.h * d)
        if self.o is not None:
            y = self.o(y)
        if self.probs_out:
            return y, p
        return y


# name -> (constructor kwargs, description)
VARIANTS = {
    "causal_mul": (dict(mask_form="trilu_shape_inf"),
                   "MHA, scores * 1/sqrt(d), causal Trilu(ones_like) mask, Where -inf"),
    "nomask_div": (dict(scale_form="div_after", proj=True),
                   "MHA, scores / sqrt(d), no mask, output projection"),
    "qscale_where1e4": (dict(scale_form="q_before", mask_form="buffer_where_1e4"),
                        "MHA, q * 1/sqrt(d) before the MatMul, bool tril buffer, Where -10000"),
    "qkscale_addinf": (dict(scale_form="qk_before", mask_form="add_inf"),
                       "MHA, q and k * d^-1/4, Add of a constant -inf upper triangle"),
    "divshape_addbig": (dict(scale_form="div_shape", mask_form="add_big"),
                        "MHA, scores / sqrt(shape[-1]), Add of a constant -1e9 upper triangle"),
    "noscale": (dict(scale_form="none"), "MHA, no scale at all (scale 1), no mask"),
    "gqa_expand": (dict(h=4, hk=2, mask_form="trilu_shape_inf"),
                   "GQA 4 heads / 2 kv heads, repeat_kv by expand+reshape, causal"),
    "gqa_interleave": (dict(h=4, hk=2, repeat_form="interleave", mask_form="add_inf",
                            scale_form="div_after"),
                       "GQA 4/2, repeat_interleave, Add -inf mask, / sqrt(d)"),
    "mask_const": (dict(mask_form="not_causal_const"),
                   "a constant bool mask that is not causal -> the DPA's mask input"),
    "trilu_k1": (dict(mask_form="trilu_k1"),
                 "Trilu with k=1 (one key past the diagonal visible): not causal -> mask input"),
    "mask_input": (dict(mask_form="input"),
                   "an explicit bool mask graph input [2, 1, S, S] (true = masked out)"),
    "mask_input_keep": (dict(mask_form="input_keep"),
                        "an explicit bool mask graph input (true = attend): Where(mask, S, -inf)"),
    # negative cases: recognized, not lowered
    "neg_mask_computed": (dict(mask_form="computed"),
                          "a mask computed from the input data"),
    "neg_row_masked": (dict(mask_form="row_masked"),
                       "a constant mask that hides every key of query 0"),
    "neg_probs_out": (dict(mask_form="trilu_shape_inf", probs_out=True),
                      "the probabilities are a second graph output"),
    "neg_dropout": (dict(mask_form="trilu_shape_inf", dropout=True),
                    "dropout on the probabilities (exported for training)"),
}


def init(module, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
    return module


def export(name, kwargs, seed):
    m = init(Attn(**kwargs), seed).eval()
    x = torch.randn(B, S, HID, generator=torch.Generator().manual_seed(seed + 100))
    outs = ["y", "probs"] if kwargs.get("probs_out") else ["y"]
    args, ins = (x,), ["x"]
    if kwargs.get("mask_form") in ("input", "input_keep"):
        g = torch.Generator().manual_seed(seed + 300)
        mask = (torch.rand(B, 1, S, S, generator=g) < 0.3) & ~torch.eye(S, dtype=torch.bool)
        if kwargs["mask_form"] == "input_keep":
            mask = ~mask  # true = attend; the diagonal always attends
        args, ins = (x, mask), ["x", "mask"]
        np.save(os.path.join(HERE, f"attn_{name}.mask.npy"), mask.numpy())
    buf = io.BytesIO()
    train = kwargs.get("dropout", False)
    torch.onnx.export(m, args, buf, opset_version=17, input_names=ins, output_names=outs,
                      do_constant_folding=not train,
                      training=torch.onnx.TrainingMode.TRAINING if train
                      else torch.onnx.TrainingMode.EVAL)
    model = onnx.load_from_string(buf.getvalue())
    model.producer_name = "pytorch"
    model.doc_string = "teexec test model (tests/import/data/make_attn_models.py): " + name
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(HERE, f"attn_{name}.onnx"))
    if not train and not name.startswith("neg_"):  # negatives are never run
        with torch.no_grad():
            y = m(*args)
        if isinstance(y, tuple):
            y = y[0]
        t = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed + 200))
        np.save(os.path.join(HERE, f"attn_{name}.x.npy"), x.numpy())
        np.save(os.path.join(HERE, f"attn_{name}.y.npy"), y.numpy())
        np.save(os.path.join(HERE, f"attn_{name}.target.npy"), t.numpy())
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"attn_{name}: {len(model.graph.node)} nodes ({', '.join(ops)})")


def main():
    for i, (name, (kw, _)) in enumerate(VARIANTS.items()):
        export(name, kw, 11 + i)


if __name__ == "__main__":
    main()
