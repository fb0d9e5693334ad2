#!/usr/bin/python3
"""Generates teexec's TE-domain sample models (domain "te.ops", version 1).

    /usr/bin/python3 models/make_te_models.py          # rewrite models/te_*/
    /usr/bin/python3 models/make_te_models.py --check  # regenerate in memory and
                                                       # compare with the files

Needs Debian's python3-torch (1.13), python3-onnx (1.12) and python3-numpy.
Tests never run this: its outputs are committed. Every run is deterministic
(fixed seeds, one CPU thread), so regenerating rewrites identical numbers.

The graphs are written node by node with onnx.helper: every node of domain
te.ops uses the op names, input order and attribute names of the registry
(format/te_schema.c, docs/te-ops.md). A te.ops node's ONNX inputs are its
main input, then its extra inputs in port order (an absent optional one is
the empty name ""), then its parameters in port order (GroupedLinear:
weight_0..weight_{G-1}, bias_0..bias_{G-1}); its ONNX outputs are its main
output, then its extra outputs.

Model tensors are float32. The expected values come from an independent
reference: plain PyTorch in float64 that implements TE's semantics from the
spec (not teexec's kernels), run on the float32 weights and inputs widened
to float64.

Per model it writes, in models/te_<name>/:
  model.onnx                 the graph, parameters as initializers
  inputs/<input>.npy         the inputs (float32; split_sizes int64)
  expected/<out>.npy         reference output, rounded to float32
  expected/float64/<out>.npy the same in float64
  expected/loss.npy          the loss below (float64 scalar)
  expected/grads.npz         float64 gradients of the loss with respect to
                             every parameter initializer (keyed by its ONNX
                             name, laid out as the initializer) and every
                             float graph input ("<input>.grad")
  train.npz                  the inputs and `target` (float32): the data for
                             `teexec train --data train.npz --loss mse`
  README                     one line: what it is

Loss: MSE = mean over all elements of (y - target)^2, target a fixed random
float32 tensor of y's shape (train.npz), y computed from inputs/.
"""
import argparse
import io
import math
import os
import sys
import zipfile
import zlib

import numpy as np
import onnx
import onnx.checker
from onnx import TensorProto, helper, numpy_helper
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.abspath(__file__))
TE = "te.ops"
OPSET = [helper.make_opsetid("", 17), helper.make_opsetid(TE, 1)]


# ---------------------------------------------------------------------------
# the float64 reference: TE semantics written from the spec (docs/te-ops.md)
# ---------------------------------------------------------------------------

def ref_layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)  # population variance
    return (x - mu) / torch.sqrt(var + eps) * w + b


def ref_rms_norm(x, w, eps=1e-5):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w


def ref_gelu_tanh(x):
    # TE's default: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def ref_swiglu(x):
    # TE splits the last dim as [gate | up]: y = silu(gate)·up
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    return a * torch.sigmoid(a) * b


def ref_rope_halves(x, base=10000.0):
    """RoPE on x [b, s, h, d] (bshd), rotating halves over the whole head:
    θ_i = pos·base^(−2i/d), channel j uses θ_(j mod d/2),
    y = x·cos + rotate_half(x)·sin with rotate_half([x1 | x2]) = [−x2 | x1]."""
    d = x.shape[-1]
    s = x.shape[1]
    inv = base ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = torch.arange(s, dtype=torch.float64)[:, None] * inv[None, :]  # [s, d/2]
    ang = torch.cat([ang, ang], dim=-1)  # [s, d]
    cos = torch.cos(ang)[None, :, None, :]
    sin = torch.sin(ang)[None, :, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    rot = torch.cat([-x2, x1], dim=-1)
    return x * cos + rot * sin


def ref_attention(q, k, v, causal, scale=None):
    """q [b, sq, h, d], k/v [b, skv, hkv, d] (bshd) -> [b, sq, h·d_v].
    Query head i reads kv head i // (h // hkv); the causal mask is
    bottom-right aligned: query i sees keys j <= i + skv − sq."""
    b, sq, h, d = q.shape
    skv, hkv = k.shape[1], k.shape[2]
    rep = h // hkv
    k = k.repeat_interleave(rep, dim=2)
    v = v.repeat_interleave(rep, dim=2)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if causal:
        i = torch.arange(sq)[:, None]
        j = torch.arange(skv)[None, :]
        s = s.masked_fill(j > i + skv - sq, float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = torch.einsum("bhqk,bkhd->bqhd", p, v)
    return o.reshape(b, sq, h * v.shape[-1])


def ref_grouped_linear(x, split_sizes, weights, biases):
    """Rows of x (flattened to [M, K]) split in order by split_sizes;
    rows past the sum belong to no group and give 0."""
    lead = x.shape[:-1]
    xm = x.reshape(-1, x.shape[-1])
    n = weights[0].shape[0]
    parts = []
    r = 0
    for g, m in enumerate(split_sizes):
        y = xm[r:r + m] @ weights[g].t()
        if biases is not None:
            y = y + biases[g]
        parts.append(y)
        r += m
    parts.append(torch.zeros(xm.shape[0] - r, n, dtype=xm.dtype))
    return torch.cat(parts, dim=0).reshape(*lead, n)


# ---------------------------------------------------------------------------
# model construction
# ---------------------------------------------------------------------------

class Builder:
    """Collects nodes, initializers (float32 numpy) and graph inputs."""

    def __init__(self, name):
        self.name = name
        self.nodes = []
        self.inits = {}    # name -> float32/int64 array, in insertion order
        self.inputs = {}   # name -> array (the values the model is run on)
        self.count = 0

    def param(self, name, arr):
        assert name not in self.inits
        self.inits[name] = np.ascontiguousarray(arr.astype(np.float32))
        return name

    def input(self, name, arr):
        self.inputs[name] = np.ascontiguousarray(arr)
        return name

    def te(self, op, inputs, n_out=1, **attrs):
        self.count += 1
        base = "%s_%d" % (op.lower(), self.count)
        outs = [base] if n_out == 1 else ["%s_%s" % (base, s) for s in ("y", "extra")[:n_out]]
        self.nodes.append(helper.make_node(op, inputs, outs, name=base, domain=TE, **attrs))
        return outs[0] if n_out == 1 else outs

    def std(self, op, inputs, n_out=1, **attrs):
        self.count += 1
        base = "%s_%d" % (op.lower(), self.count)
        outs = ["%s_%d" % (base, i) for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=base, **attrs))
        return outs[0] if n_out == 1 else outs

    def finish(self, out_value, out_name, out_shape):
        # The last node writes the graph output under its public name.
        last = self.nodes[-1]
        assert last.output[0] == out_value
        last.output[0] = out_name
        g_inputs = []
        for n, a in self.inputs.items():
            et = TensorProto.INT64 if a.dtype == np.int64 else TensorProto.FLOAT
            g_inputs.append(helper.make_tensor_value_info(n, et, list(a.shape)))
        g_out = [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, list(out_shape))]
        inits = [numpy_helper.from_array(a, n) for n, a in self.inits.items()]
        graph = helper.make_graph(self.nodes, self.name, g_inputs, g_out, initializer=inits)
        model = helper.make_model(graph, opset_imports=OPSET, producer_name="make_te_models.py",
                                  producer_version="1")
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def rng_weights(seed):
    rs = np.random.RandomState(seed)

    def w(*shape, scale=None):
        fan_in = shape[-1]
        s = (1.0 / math.sqrt(fan_in)) if scale is None else scale
        return (rs.standard_normal(shape) * s).astype(np.float32)

    def near_one(n):
        return (1.0 + 0.1 * rs.standard_normal(n)).astype(np.float32)

    return rs, w, near_one


def t64(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64).copy())


def te_mlp():
    """LayerNorm -> Linear -> Bias -> GELU(tanh) -> Linear -> Bias, residual."""
    B, S, H, FF = 2, 8, 32, 128
    rs, w, near_one = rng_weights(101)
    g = Builder("te_mlp")
    x = g.input("x", rs.standard_normal((B, S, H)).astype(np.float32))
    P = dict(ln_weight=near_one(H), ln_bias=w(H, scale=0.1), fc1_weight=w(FF, H),
             fc1_bias=w(FF, scale=0.1), fc2_weight=w(H, FF), fc2_bias=w(H, scale=0.1))
    for k, v in P.items():
        g.param(k, v)

    h, res = g.te("MakeExtraOutput", [x], n_out=2)
    h = g.te("LayerNorm", [h, "ln_weight", "ln_bias"])  # eps default 1e-5
    h = g.te("Linear", [h, "fc1_weight"])
    h = g.te("Bias", [h, "fc1_bias"])
    h = g.te("GELU", [h])  # approximate default: tanh
    h = g.te("Linear", [h, "fc2_weight"])
    h = g.te("Bias", [h, "fc2_bias"])
    y = g.te("AddExtraInput", [h, res])
    model = g.finish(y, "y", (B, S, H))

    def ref(p, inp):
        xx = inp["x"]
        hh = ref_layer_norm(xx, p["ln_weight"], p["ln_bias"])
        hh = hh @ p["fc1_weight"].t() + p["fc1_bias"]
        hh = ref_gelu_tanh(hh)
        hh = hh @ p["fc2_weight"].t() + p["fc2_bias"]
        return hh + xx

    return g, model, ref, ("pre-LN MLP block in te.ops: MakeExtraOutput, LayerNorm, Linear 32->128, "
                           "Bias, GELU (tanh, default), Linear 128->32, Bias, AddExtraInput; "
                           "x [2, 8, 32]")


def te_gpt2_block():
    """GPT-2 style pre-LN block: fused QKV, causal attention, MLP."""
    B, S, H, NH, FF = 2, 16, 32, 4, 64
    D = H // NH
    rs, w, near_one = rng_weights(202)
    g = Builder("te_gpt2_block")
    x = g.input("x", rs.standard_normal((B, S, H)).astype(np.float32))
    P = dict(ln1_weight=near_one(H), ln1_bias=w(H, scale=0.1),
             qkv_weight=w(3 * H, H), qkv_bias=w(3 * H, scale=0.1),
             proj_weight=w(H, H), proj_bias=w(H, scale=0.1),
             ln2_weight=near_one(H), ln2_bias=w(H, scale=0.1),
             fc1_weight=w(FF, H), fc1_bias=w(FF, scale=0.1),
             fc2_weight=w(H, FF), fc2_bias=w(H, scale=0.1))
    for k, v in P.items():
        g.param(k, v)
    g.inits["qkv_split"] = np.array([H, H, H], dtype=np.int64)

    h, res1 = g.te("MakeExtraOutput", [x], n_out=2)
    h = g.te("LayerNorm", [h, "ln1_weight", "ln1_bias"], eps=1e-5)
    h = g.te("Linear", [h, "qkv_weight"])
    h = g.te("Bias", [h, "qkv_bias"])
    # te.ops has no split: the standard ONNX Split cuts [q | k | v].
    q, k, v = g.std("Split", [h, "qkv_split"], n_out=3, axis=-1)
    q = g.te("Reshape", [q], shape=[B, S, NH, D])
    k = g.te("Reshape", [k], shape=[B, S, NH, D])
    v = g.te("Reshape", [v], shape=[B, S, NH, D])
    h = g.te("DotProductAttention", [q, k, v, ""], causal=1, num_attention_heads=NH,
             qkv_format="bshd")
    h = g.te("Linear", [h, "proj_weight"])
    h = g.te("Bias", [h, "proj_bias"])
    h = g.te("AddExtraInput", [h, res1])
    h, res2 = g.te("MakeExtraOutput", [h], n_out=2)
    h = g.te("LayerNorm", [h, "ln2_weight", "ln2_bias"])
    h = g.te("Linear", [h, "fc1_weight"])
    h = g.te("Bias", [h, "fc1_bias"])
    h = g.te("GELU", [h], approximate="tanh")
    h = g.te("Linear", [h, "fc2_weight"])
    h = g.te("Bias", [h, "fc2_bias"])
    y = g.te("AddExtraInput", [h, res2])
    model = g.finish(y, "y", (B, S, H))

    def ref(p, inp):
        xx = inp["x"]
        hh = ref_layer_norm(xx, p["ln1_weight"], p["ln1_bias"])
        qkv = hh @ p["qkv_weight"].t() + p["qkv_bias"]
        qq, kk, vv = [t.reshape(B, S, NH, D) for t in qkv.split(H, dim=-1)]
        a = ref_attention(qq, kk, vv, causal=True)
        h1 = a @ p["proj_weight"].t() + p["proj_bias"] + xx
        hh = ref_layer_norm(h1, p["ln2_weight"], p["ln2_bias"])
        hh = ref_gelu_tanh(hh @ p["fc1_weight"].t() + p["fc1_bias"])
        return hh @ p["fc2_weight"].t() + p["fc2_bias"] + h1

    return g, model, ref, ("GPT-2 style pre-LN block in te.ops: LayerNorm, Linear+Bias QKV 32->96, "
                           "ONNX Split, Reshape, DotProductAttention (4 heads, causal), Linear+Bias "
                           "proj, residual, LayerNorm, Linear 32->64, Bias, GELU tanh, Linear "
                           "64->32, Bias, residual; x [2, 16, 32]")


def te_llama_block():
    """Llama style block: RMSNorm, q/k/v with GQA, RoPE, causal attention, SwiGLU MLP."""
    B, S, H, NH, NKV, FF = 2, 16, 32, 4, 2, 64
    D = H // NH
    rs, w, near_one = rng_weights(303)
    g = Builder("te_llama_block")
    x = g.input("x", rs.standard_normal((B, S, H)).astype(np.float32))
    P = dict(attn_norm_weight=near_one(H), q_weight=w(NH * D, H), k_weight=w(NKV * D, H),
             v_weight=w(NKV * D, H), o_weight=w(H, NH * D), mlp_norm_weight=near_one(H),
             gate_up_weight=w(2 * FF, H), down_weight=w(H, FF))
    for k, v in P.items():
        g.param(k, v)

    h, res1 = g.te("MakeExtraOutput", [x], n_out=2)
    h = g.te("RMSNorm", [h, "attn_norm_weight"], eps=1e-6)
    q = g.te("Linear", [h, "q_weight"])
    k = g.te("Linear", [h, "k_weight"])
    v = g.te("Linear", [h, "v_weight"])
    q = g.te("Reshape", [q], shape=[B, S, NH, D])
    k = g.te("Reshape", [k], shape=[B, S, NKV, D])
    v = g.te("Reshape", [v], shape=[B, S, NKV, D])
    # RoPE: rotate halves (interleaved=0), angles from base (no freqs input).
    q = g.te("RotaryEmbedding", [q, ""], qkv_format="bshd", interleaved=0, base=10000.0)
    k = g.te("RotaryEmbedding", [k, ""], interleaved=0)
    h = g.te("DotProductAttention", [q, k, v, ""], causal=1, num_attention_heads=NH,
             num_gqa_groups=NKV)
    h = g.te("Linear", [h, "o_weight"])
    h = g.te("AddExtraInput", [h, res1])
    h, res2 = g.te("MakeExtraOutput", [h], n_out=2)
    h = g.te("RMSNorm", [h, "mlp_norm_weight"], eps=1e-6)
    h = g.te("Linear", [h, "gate_up_weight"])  # rows 0..FF-1 gate, FF..2FF-1 up
    h = g.te("SwiGLU", [h])
    h = g.te("Linear", [h, "down_weight"])
    y = g.te("AddExtraInput", [h, res2])
    model = g.finish(y, "y", (B, S, H))

    def ref(p, inp):
        xx = inp["x"]
        hh = ref_rms_norm(xx, p["attn_norm_weight"], eps=1e-6)
        qq = (hh @ p["q_weight"].t()).reshape(B, S, NH, D)
        kk = (hh @ p["k_weight"].t()).reshape(B, S, NKV, D)
        vv = (hh @ p["v_weight"].t()).reshape(B, S, NKV, D)
        a = ref_attention(ref_rope_halves(qq), ref_rope_halves(kk), vv, causal=True)
        h1 = a @ p["o_weight"].t() + xx
        hh = ref_rms_norm(h1, p["mlp_norm_weight"], eps=1e-6)
        hh = ref_swiglu(hh @ p["gate_up_weight"].t())
        return hh @ p["down_weight"].t() + h1

    return g, model, ref, ("Llama style block in te.ops: RMSNorm, Linear q/k/v (4 heads, 2 kv "
                           "heads: GQA), Reshape, RotaryEmbedding (halves, base 10000), "
                           "DotProductAttention causal, Linear o, residual, RMSNorm, Linear "
                           "gate|up 32->128, SwiGLU, Linear down 64->32, residual; x [2, 16, 32]")


def te_moe_block():
    """MoE expert MLP: GroupedLinear fc1 (+bias), ScaledSwiGLU, GroupedLinear fc2 (no bias)."""
    B, S, H, FF, G = 2, 8, 32, 32, 3
    SPLIT = [5, 3, 6]  # 14 of the 16 rows: rows 14, 15 belong to no expert
    rs, w, near_one = rng_weights(404)
    g = Builder("te_moe_block")
    x = g.input("x", rs.standard_normal((B, S, H)).astype(np.float32))
    g.input("split_sizes", np.array(SPLIT, dtype=np.int64))
    g.input("scales", rs.uniform(0.2, 1.0, (B, S)).astype(np.float32))
    for e in range(G):
        g.param("fc1_weight%d" % e, w(2 * FF, H))
    for e in range(G):
        g.param("fc1_bias%d" % e, w(2 * FF, scale=0.1))
    for e in range(G):
        g.param("fc2_weight%d" % e, w(H, FF))

    h = g.te("GroupedLinear", [x, "split_sizes"] + ["fc1_weight%d" % e for e in range(G)]
             + ["fc1_bias%d" % e for e in range(G)], num_groups=G)  # bias default 1
    h = g.te("ScaledSwiGLU", [h, "scales"])
    y = g.te("GroupedLinear", [h, "split_sizes"] + ["fc2_weight%d" % e for e in range(G)],
             num_groups=G, bias=0)
    model = g.finish(y, "y", (B, S, H))

    def ref(p, inp):
        sizes = [int(s) for s in inp["split_sizes"]]
        hh = ref_grouped_linear(inp["x"], sizes, [p["fc1_weight%d" % e] for e in range(G)],
                                [p["fc1_bias%d" % e] for e in range(G)])
        hh = ref_swiglu(hh) * inp["scales"][..., None]
        return ref_grouped_linear(hh, sizes, [p["fc2_weight%d" % e] for e in range(G)], None)

    return g, model, ref, ("MoE expert MLP in te.ops: GroupedLinear 3 experts 32->64 with bias "
                           "(split_sizes input [5, 3, 6]: rows 14, 15 of 16 in no group), "
                           "ScaledSwiGLU (scales input), GroupedLinear 32->32 bias=0; x [2, 8, 32]")


MODELS = [te_mlp, te_gpt2_block, te_llama_block, te_moe_block]


# ---------------------------------------------------------------------------
# reference run and files
# ---------------------------------------------------------------------------

def reference(g, ref, target):
    """Runs the float64 reference; returns (y64, loss, grads)."""
    params = {n: t64(a).requires_grad_(True) for n, a in g.inits.items() if a.dtype == np.float32}
    inputs = {}
    for n, a in g.inputs.items():
        if a.dtype == np.int64:
            inputs[n] = a
        else:
            inputs[n] = t64(a).requires_grad_(True)
    y = ref(params, inputs)
    loss = ((y - t64(target)) ** 2).mean()
    loss.backward()
    grads = {}
    for n, p in params.items():
        grads[n] = p.grad.numpy().copy()
    for n, t in inputs.items():
        if isinstance(t, torch.Tensor):
            grads[n + ".grad"] = t.grad.numpy().copy()
    return y.detach().numpy(), float(loss.item()), grads


def npy_bytes(arr):
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def npz_bytes(arrays):
    # A fixed member date keeps the file byte-identical across runs.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for n, a in arrays.items():
            info = zipfile.ZipInfo(n + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, npy_bytes(a))
    return buf.getvalue()


def build(factory):
    """Returns {relative path: bytes} for one model folder."""
    g, model, ref, description = factory()
    name = g.name
    out_shape = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    rs = np.random.RandomState(zlib.crc32(name.encode()))  # stable per model
    target = rs.standard_normal(out_shape).astype(np.float32)
    y64, loss, grads = reference(g, ref, target)
    files = {"model.onnx": model.SerializeToString()}
    for n, a in g.inputs.items():
        files["inputs/%s.npy" % n] = npy_bytes(a)
    files["expected/y.npy"] = npy_bytes(y64.astype(np.float32))
    files["expected/float64/y.npy"] = npy_bytes(y64)
    files["expected/loss.npy"] = npy_bytes(np.array(loss, dtype=np.float64))
    files["expected/grads.npz"] = npz_bytes(grads)
    train = dict(g.inputs)
    train["target"] = target
    files["train.npz"] = npz_bytes(train)
    files["README"] = (description + "\n").encode()
    ops = sorted({("%s:%s" % (n.domain or "ai.onnx", n.op_type)) for n in model.graph.node})
    size = sum(len(b) for b in files.values())
    print("%-16s %6.1f KiB  loss %.6f  %d grads  ops %s" % (name, size / 1024.0, loss,
                                                          len(grads), " ".join(ops)))
    assert size < 200 * 1024, "%s is %d bytes: keep each folder under 200 KiB" % (name, size)
    return name, files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compare with the committed files instead of writing")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    bad = 0
    for factory in MODELS:
        name, files = build(factory)
        folder = os.path.join(ROOT, name)
        for rel, data in files.items():
            path = os.path.join(folder, rel)
            if args.check:
                try:
                    with open(path, "rb") as f:
                        same = f.read() == data
                except OSError:
                    same = False
                if not same:
                    print("differs: %s" % path)
                    bad += 1
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
