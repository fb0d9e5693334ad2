#!/usr/bin/python3
"""Generates teexec's sample models with PyTorch's own ONNX exporter.

    /usr/bin/python3 models/make_models.py              # rewrite models/<name>/
    /usr/bin/python3 models/make_models.py --bench DIR  # bench-size GPT-2 block
                                                        # (not committed)

Needs Debian's python3-torch (1.13), python3-onnx (1.12) and python3-numpy.
Tests never run this: its outputs are committed. Every run is deterministic
(fixed seeds, CPU, float32), so regenerating rewrites identical numbers.

Per model it writes:
  models/<name>/model.onnx            torch.onnx.export, opset 17 unless noted
  models/<name>/inputs/<input>.npy    the inputs it was run on
  models/<name>/expected/<out>.npy    PyTorch's own float32 outputs
  models/<name>/README                one line: what it is
and, for the trainable examples (mlp, gpt2_block, llama_block):
  models/<name>/train.npz             <input> [8, ...] and `target` [8, ...]
  models/<name>/expected/grads.npz    d(MSE)/d(initializer) for the first
                                      batch (samples 0..1), keyed by ONNX
                                      initializer name and laid out as the
                                      initializer; plus "<input>.grad"
  models/<name>/expected/adamw_loss.npy  PyTorch AdamW loss per step (see
                                      TRAIN_RECIPE below)
"""
import argparse
import collections
import io
import math
import os
import sys

import numpy as np
import onnx
import onnx.checker
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.abspath(__file__))
OPSET = 17

# Training reference for models with train.npz: MSE = mean over all
# elements of (output - target)^2; batch b of step s is samples
# [2*(s % 4), 2*(s % 4) + 2) of train.npz (the model's batch is 2);
# torch.optim.AdamW with these settings, weights as in model.onnx.
TRAIN_RECIPE = dict(steps=200, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
TRAIN_SAMPLES = 8
BATCH = 2


class MLP(nn.Module):
    """Pre-LN MLP block: x + fc2(gelu(fc1(layernorm(x))))."""

    def __init__(self, hidden=64, ffn=256, approximate="none"):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)
        self.approximate = approximate

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x)), approximate=self.approximate))


class GPT2Block(nn.Module):
    """GPT-2 style pre-LN transformer block with causal self-attention."""

    def __init__(self, hidden=64, heads=4, ffn=None):
        super().__init__()
        ffn = ffn or 4 * hidden
        self.heads = heads
        self.scale = 1.0 / math.sqrt(hidden // heads)
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x):
        b, t, c = x.shape
        hd = c // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.reshape(b, t, self.heads, hd).transpose(1, 2)
        k = k.reshape(b, t, self.heads, hd).transpose(1, 2)
        v = v.reshape(b, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * self.scale
        # Built from the scores' own shape so the exporter keeps Trilu and
        # Where in the graph instead of folding the mask into a constant.
        causal = torch.tril(torch.ones_like(att[0, 0]))
        att = att.masked_fill(causal == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class RMSNorm(nn.Module):
    """Llama's RMSNorm, written as the usual torch code so the exporter
    spells it out (Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul)."""

    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaBlock(nn.Module):
    """Llama style pre-norm block: RMSNorm, q/k/v projections without bias
    and grouped-query attention (kv_heads < heads), rotary embedding on q and
    k (halves rotated, base 10000), causal softmax attention, o_proj,
    residual, RMSNorm, SwiGLU MLP (down(silu(gate(x)) * up(x))), residual."""

    def __init__(self, hidden=64, heads=4, kv_heads=2, ffn=128, seq=16, base=10000.0):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        self.hd = hidden // heads
        self.scale = 1.0 / math.sqrt(self.hd)
        self.attn_norm = RMSNorm(hidden)
        self.q_proj = nn.Linear(hidden, heads * self.hd, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(heads * self.hd, hidden, bias=False)
        self.mlp_norm = RMSNorm(hidden)
        self.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.up_proj = nn.Linear(hidden, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, hidden, bias=False)
        inv_freq = 1.0 / (base ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))
        angles = torch.outer(torch.arange(seq, dtype=torch.float32), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    @staticmethod
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def rope(self, x, t):
        return x * self.cos[:t] + self.rotate_half(x) * self.sin[:t]

    def forward(self, x):
        b, t, c = x.shape
        hd, rep = self.hd, self.heads // self.kv_heads
        h = self.attn_norm(x)
        q = self.q_proj(h).reshape(b, t, self.heads, hd).transpose(1, 2)
        k = self.k_proj(h).reshape(b, t, self.kv_heads, hd).transpose(1, 2)
        v = self.v_proj(h).reshape(b, t, self.kv_heads, hd).transpose(1, 2)
        q, k = self.rope(q, t), self.rope(k, t)
        # repeat_kv: each kv head serves `rep` consecutive query heads.
        k = k[:, :, None].expand(b, self.kv_heads, rep, t, hd).reshape(b, self.heads, t, hd)
        v = v[:, :, None].expand(b, self.kv_heads, rep, t, hd).reshape(b, self.heads, t, hd)
        att = (q @ k.transpose(-2, -1)) * self.scale
        causal = torch.tril(torch.ones_like(att[0, 0]))
        att = att.masked_fill(causal == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.o_proj(y)
        h = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


def init_weights(module, seed):
    """Deterministic random weights; LayerNorm gamma/beta are perturbed away
    from 1/0 so a backend that ignores them fails the comparison."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("weight") and p.dim() == 1:  # LayerNorm gamma
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[1]
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))
    return module


def export(module, example, path, opset=OPSET):
    buf = io.BytesIO()
    torch.onnx.export(module, (example,), buf, opset_version=opset,
                      input_names=["x"], output_names=["y"], do_constant_folding=True)
    model = onnx.load_from_string(buf.getvalue())
    model.producer_name = "pytorch"
    model.doc_string = "teexec sample model (models/make_models.py)"
    onnx.checker.check_model(model, full_check=True)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(model, path)
    return model


def op_histogram(model):
    return collections.Counter(n.op_type for n in model.graph.node)


def save_npy(path, arr):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ascontiguousarray(arr), allow_pickle=False)


def initializer_grads(model, module, x_grad):
    """Maps each ONNX initializer to the gradient of the PyTorch parameter
    it came from. The exporter stores Linear weights transposed (for MatMul)
    under generated names, so the match is by value: equal, or equal to the
    transpose. Weights are random, so matches are unique."""
    params = {n: p for n, p in module.named_parameters()}
    out = {}
    for init in model.graph.initializer:
        arr = onnx.numpy_helper.to_array(init)
        found = None
        for n, p in params.items():
            pv = p.detach().numpy()
            if pv.shape == arr.shape and np.array_equal(pv, arr):
                found = p.grad.numpy()
            elif pv.ndim == 2 and pv.T.shape == arr.shape and np.array_equal(pv.T, arr):
                found = p.grad.numpy().T
            if found is not None:
                break
        if found is None:
            continue  # a constant the exporter made (shapes, scale): no gradient
        out[init.name] = np.ascontiguousarray(found, dtype=np.float32)
    n_params = sum(1 for _ in module.parameters())
    if len(out) != n_params:
        sys.exit(f"matched {len(out)} initializers to {n_params} parameters")
    out["x.grad"] = x_grad.numpy().astype(np.float32)
    return out


def write_training(name, module, model, make_teacher, x_shape, seed):
    """train.npz (inputs + MSE target from a teacher with other weights),
    first-batch gradients, and PyTorch's AdamW loss curve."""
    folder = os.path.join(ROOT, name)
    g = torch.Generator().manual_seed(seed)
    xs = torch.randn((TRAIN_SAMPLES,) + tuple(x_shape[1:]), generator=g)
    teacher = init_weights(make_teacher(), seed + 1).eval()
    with torch.no_grad():
        target = teacher(xs)
    np.savez_compressed(os.path.join(folder, "train.npz"), x=xs.numpy(), target=target.numpy())

    student = init_weights(make_teacher(), seed)  # same weights as model.onnx
    xb = xs[:BATCH].clone().requires_grad_(True)
    loss = F.mse_loss(student(xb), target[:BATCH])
    loss.backward()
    grads = initializer_grads(model, student, xb.grad)
    np.savez_compressed(os.path.join(folder, "expected", "grads.npz"), **grads)

    student = init_weights(make_teacher(), seed)
    r = TRAIN_RECIPE
    opt = torch.optim.AdamW(student.parameters(), lr=r["lr"], betas=r["betas"], eps=r["eps"],
                            weight_decay=r["weight_decay"])
    losses = []
    for s in range(r["steps"]):
        i = BATCH * (s % (TRAIN_SAMPLES // BATCH))
        opt.zero_grad()
        loss = F.mse_loss(student(xs[i:i + BATCH]), target[i:i + BATCH])
        losses.append(loss.item())
        loss.backward()
        opt.step()
    save_npy(os.path.join(folder, "expected", "adamw_loss.npy"), np.array(losses, np.float32))
    print(f"  {name}: MSE {losses[0]:.4g} -> {losses[-1]:.4g} "
          f"({losses[0] / losses[-1]:.1f}x) in {r['steps']} AdamW steps")


def make_model(name, factory, x_shape, seed, description, opset=OPSET, train=False):
    torch.manual_seed(seed)
    module = init_weights(factory(), seed).eval()
    x = torch.randn(x_shape, generator=torch.Generator().manual_seed(seed + 100))
    folder = os.path.join(ROOT, name)
    model = export(module, x, os.path.join(folder, "model.onnx"), opset)
    with torch.no_grad():
        y = module(x)
    save_npy(os.path.join(folder, "inputs", "x.npy"), x.numpy())
    save_npy(os.path.join(folder, "expected", "y.npy"), y.numpy())
    with open(os.path.join(folder, "README"), "w") as f:
        f.write(description + f" Input x {list(x_shape)} float32, output y; opset {opset}; "
                "made by models/make_models.py.\n")
    hist = op_histogram(model)
    print(f"{name} (opset {opset}): " + ", ".join(f"{k} {v}" for k, v in sorted(hist.items())))
    if train:
        write_training(name, module, model, factory, x_shape, seed)
    return hist


def make_all():
    total = collections.Counter()
    total += make_model("mlp", lambda: MLP(approximate="none"), (2, 8, 64), 1,
                        "MLP block: LayerNorm -> Linear 64x256 -> GELU (erf) -> Linear 256x64 "
                        "+ residual.", train=True)
    total += make_model("mlp_tanh", lambda: MLP(approximate="tanh"), (2, 8, 64), 2,
                        "MLP block with tanh-approximated GELU: LayerNorm -> Linear 64x256 -> "
                        "GELU (tanh) -> Linear 256x64 + residual.")
    total += make_model("mlp_opset14", lambda: MLP(approximate="none"), (2, 8, 64), 1,
                        "The mlp model exported at opset 14: LayerNorm decomposed into "
                        "ReduceMean/Sub/Pow/Sqrt/Div, GELU as Erf. Same weights, input and "
                        "expected output as mlp.", opset=14)
    total += make_model("gpt2_block", lambda: GPT2Block(64, 4), (2, 16, 64), 3,
                        "GPT-2 style pre-LN block: LayerNorm, fused QKV Linear, Split, 4 heads "
                        "(Reshape/Transpose), causal self-attention (Trilu mask, Where, "
                        "Softmax), projection, residual, LayerNorm, MLP 64x256 with tanh-GELU, "
                        "residual.", train=True)
    total += make_model("llama_block", lambda: LlamaBlock(64, 4, 2, 128, 16), (2, 16, 64), 4,
                        "Llama style pre-norm block: RMSNorm (x * rsqrt(mean(x^2) + eps) * w), "
                        "q/k/v Linear without bias, 4 heads with 2 kv heads (GQA, repeat_kv by "
                        "Expand/Reshape), rotary embedding (Slice/Neg/Concat), causal "
                        "self-attention (Trilu mask, Where, Softmax), o_proj, residual, RMSNorm, "
                        "SwiGLU MLP 64x128 (gate, up, down without bias), residual.", train=True)
    print("all models: " + ", ".join(f"{k} {v}" for k, v in sorted(total.items())))


def make_bench(outdir):
    """hidden 768, 12 heads, seq 128, batch 1 and 8: OUTDIR/b{1,8}/model.onnx
    plus inputs/x.npy (the weights make ~28 MB per file)."""
    module = init_weights(GPT2Block(768, 12), 7).eval()
    for batch in (1, 8):
        x = torch.randn((batch, 128, 768), generator=torch.Generator().manual_seed(8))
        folder = os.path.join(outdir, f"b{batch}")
        model = export(module, x, os.path.join(folder, "model.onnx"))
        save_npy(os.path.join(folder, "inputs", "x.npy"), x.numpy())
        with torch.no_grad():
            save_npy(os.path.join(folder, "expected", "y.npy"), module(x).numpy())
        print(f"{folder}/model.onnx: " +
              ", ".join(f"{k} {v}" for k, v in sorted(op_histogram(model).items())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", metavar="OUTDIR",
                    help="write the bench-size GPT-2 block (batch 1 and 8) under OUTDIR")
    args = ap.parse_args()
    torch.set_num_threads(1)  # same numbers on every machine
    if args.bench:
        make_bench(args.bench)
    else:
        make_all()


if __name__ == "__main__":
    main()
