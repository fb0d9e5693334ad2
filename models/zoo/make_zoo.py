#!/usr/bin/env python3
"""Generates teexec's model zoo: tiny random-weight Hugging Face models (and a
nanoGPT-layout GPT-2) exported by today's PyTorch with both of its exporters.

    python3 models/zoo/make_zoo.py                 # rewrite models/zoo/<export>/
    python3 models/zoo/make_zoo.py --only gpt2     # one architecture
    python3 models/zoo/make_zoo.py --check         # regenerate into a temporary
                                                   # folder, compare bytes
    python3 models/zoo/make_zoo.py --gpt2-124m DIR # the full nanoGPT GPT-2 124M
                                                   # (about 500 MB per export;
                                                   # never committed)

Needs torch (2.11), transformers (5.x), onnx, onnxscript and onnxruntime:
none of them are Debian packages, so this runs on the lent GPU machine
(models/zoo/run_device.sh) and its outputs are committed. Tests never run
it. Everything is computed on the CPU in float32 with one thread and fixed
seeds; archives are written with fixed timestamps, so a second run writes the
same bytes (--check proves it).

Per export, models/zoo/<arch>_<exporter>/ holds:
  model.onnx                 the export (weights inline)
  meta.json                  what it is: architecture, exporter, opset, inputs,
                             outputs, the loss, which initializers are
                             parameters (and the PyTorch name, layout and tied
                             group of each), ONNX Runtime's agreement
  inputs/<input>.npy         the inputs the expected outputs were made from
  expected/<output>.npy      PyTorch's float32 outputs
  expected/grads.npz         d loss / d initializer for every initializer that
                             holds a parameter, laid out as the initializer;
                             a tied parameter's full gradient under each of
                             its initializers
  expected/loss.npy          the loss of that first batch (float64 scalar)
  expected/adamw_loss.npy    the loss before each of ADAMW_STEPS AdamW steps
  train.npz                  TRAIN_SAMPLES rows of inputs (+ labels / target)
  expected/greedy_ids.npy    decoders: prompt + GREEDY_NEW greedy tokens,
                             recomputing the whole sequence at every step

The loss: decoders (language models) use the mean cross-entropy of the
logits against the ids shifted by one (labels[t] = ids[t+1], the last
position -100, ignored) -- `teexec train --loss cross-entropy` on train.npz's
`labels`; encoders and the ViT use the mean squared error against a random
`target` -- `teexec train --loss mse`. Step s of the AdamW curve trains on rows
[BATCH*(s % 4), BATCH*(s % 4) + BATCH) of train.npz, as `teexec train
--batch 2` walks them.
"""
import argparse
import collections
import filecmp
import hashlib
import io
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
import warnings
import zipfile

import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__))

BATCH = 2
SEQ = 16
VOCAB = 256
TRAIN_SAMPLES = 8
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
ADAMW_STEPS = 50
GREEDY_PROMPT = 8
GREEDY_NEW = 32
TORCHSCRIPT_OPSET = 17


# ---------------------------------------------------------------- writing


def save_npy(path, arr):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        np.save(f, np.ascontiguousarray(arr), allow_pickle=False)


def save_npz(path, arrays):
    """An .npz with stored members and a fixed timestamp (np.savez stamps
    the current time, so its bytes change from run to run)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for name in sorted(arrays):
            buf = io.BytesIO()
            np.save(buf, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, buf.getvalue())


def save_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


# ---------------------------------------------------------------- weights


def distinct_weights(module, seed):
    """Every parameter gets its own random values (norm gains near 1, biases
    and other vectors near 0, matrices and embeddings scaled by
    1/sqrt(fan-in)): no parameter equals another, so a gradient sent to the
    wrong place shows, and initializers can be matched to parameters by
    value. Gemma-style norms scale by (1 + w), so their w sits near 0."""
    import torch
    gains = set()
    for mname, m in module.named_modules():
        cls = type(m).__name__
        if "Norm" in cls and not cls.startswith("Gemma"):
            w = getattr(m, "weight", None)
            if isinstance(w, torch.nn.Parameter):
                gains.add(id(w))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() == 1:
                base = 1.0 if id(p) in gains else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
            else:
                fan_in = int(np.prod(p.shape[1:]))
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(max(fan_in, 1)))
    return module


def initializer_params(onnx_model, module):
    """Maps ONNX initializers to the PyTorch parameters they hold, by value.
    An initializer may be the parameter itself; its transpose (MatMul
    stores nn.Linear's weight as [in, out]); its first rows, perhaps under
    leading 1-dims (a position table the exporter sliced to the static
    sequence length: "rows"); 1 + the parameter (Gemma's (1 + w) norm gain,
    folded: "plus_one"); or the parameter repeated along dim 0 (a [1, ...]
    token expanded to the batch: "broadcast", whose gradient is the sum of
    the copies'). Returns {init name: (param name, how)} with how one of
    "same", "transposed", "rows", "plus_one", "broadcast"."""
    import onnx.numpy_helper
    params = [(n, p.detach().cpu().numpy()) for n, p in module.named_parameters()]
    out = {}
    for init in onnx_model.graph.initializer:
        arr = onnx.numpy_helper.to_array(init)
        if arr.dtype != np.float32:
            continue
        squeezed = arr
        while squeezed.ndim > 1 and squeezed.shape[0] == 1:
            squeezed = squeezed[0]
        for n, v in params:
            if v.shape == arr.shape and np.array_equal(v, arr):
                how = "same"
            elif v.ndim == 2 and v.T.shape == arr.shape and np.array_equal(v.T, arr):
                how = "transposed"
            elif (squeezed.ndim == v.ndim and squeezed.shape[1:] == v.shape[1:]
                  and 0 < squeezed.shape[0] < v.shape[0]
                  and np.array_equal(v[:squeezed.shape[0]], squeezed)):
                how = "rows"
            elif v.shape == arr.shape and np.array_equal(np.float32(1) + v, arr):
                how = "plus_one"
            elif (v.ndim == arr.ndim and v.ndim >= 2 and v.shape[0] == 1 and arr.shape[0] > 1
                  and v.shape[1:] == arr.shape[1:] and all(np.array_equal(a, v[0]) for a in arr)):
                how = "broadcast"
            else:
                continue
            out[init.name] = (n, how)
            break
    return out


def strip_node_metadata(model):
    """Drops the exporter's per-node metadata (stack traces through this
    script and the installed packages, Python module names of the worker
    that exported): it depends on where the script ran, not on the model,
    and would make the bytes differ from run to run."""
    def graphs(g):
        yield g
        for n in g.node:
            for a in n.attribute:
                if a.g is not None and a.HasField("g"):
                    yield from graphs(a.g)
                for sg in a.graphs:
                    yield from graphs(sg)
    nodes = []
    for g in graphs(model.graph):
        nodes.extend(g.node)
    for f in model.functions:
        nodes.extend(f.node)
    for n in nodes:
        if hasattr(n, "metadata_props"):
            del n.metadata_props[:]
        n.doc_string = ""
    return model


# ---------------------------------------------------------------- models


def hf_models():
    """(name, kind, build) for each Hugging Face architecture. kind is
    "decoder", "encoder" or "vision"; build() returns the model in eval
    mode with dropout off."""
    import transformers as tf

    common_dec = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=4,
                      max_position_embeddings=64)

    def gpt2():
        return tf.GPT2LMHeadModel(tf.GPT2Config(
            vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4, n_inner=64,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0))

    def llama():
        return tf.LlamaForCausalLM(tf.LlamaConfig(
            **common_dec, num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6,
            tie_word_embeddings=False, bos_token_id=0, eos_token_id=0, pad_token_id=0))

    def opt():
        return tf.OPTForCausalLM(tf.OPTConfig(
            vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
            num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=32,
            dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, layerdrop=0.0,
            do_layer_norm_before=True, bos_token_id=0, eos_token_id=0, pad_token_id=1))

    def qwen2():
        return tf.Qwen2ForCausalLM(tf.Qwen2Config(
            **common_dec, num_key_value_heads=2, rms_norm_eps=1e-6, tie_word_embeddings=True,
            bos_token_id=0, eos_token_id=0))

    def mistral():
        return tf.MistralForCausalLM(tf.MistralConfig(
            **common_dec, num_key_value_heads=2, head_dim=8, sliding_window=None,
            rms_norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0))

    def gpt_neox():
        return tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(
            vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, rotary_pct=0.5, max_position_embeddings=64,
            use_parallel_residual=True, hidden_dropout=0.0, attention_dropout=0.0,
            tie_word_embeddings=False, bos_token_id=0, eos_token_id=0))

    def phi():
        return tf.PhiForCausalLM(tf.PhiConfig(
            **common_dec, partial_rotary_factor=0.5, resid_pdrop=0.0, embd_pdrop=0.0,
            attention_dropout=0.0, bos_token_id=0, eos_token_id=0))

    def gemma():
        return tf.GemmaForCausalLM(tf.GemmaConfig(
            **{**common_dec, "num_attention_heads": 4}, num_key_value_heads=1, head_dim=8,
            hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6,
            bos_token_id=0, eos_token_id=0, pad_token_id=0))

    common_enc = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64,
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

    def bert():
        return tf.BertModel(tf.BertConfig(**common_enc, max_position_embeddings=64,
                                          type_vocab_size=2), add_pooling_layer=False)

    def roberta():
        return tf.RobertaModel(tf.RobertaConfig(**common_enc, max_position_embeddings=66,
                                                type_vocab_size=1, pad_token_id=1),
                               add_pooling_layer=False)

    def distilbert():
        return tf.DistilBertModel(tf.DistilBertConfig(
            vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
            max_position_embeddings=64, dropout=0.0, attention_dropout=0.0))

    def electra():
        return tf.ElectraModel(tf.ElectraConfig(**common_enc, embedding_size=16,
                                                max_position_embeddings=64, type_vocab_size=2))

    def vit():
        return tf.ViTModel(tf.ViTConfig(
            image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=4, intermediate_size=64, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0), add_pooling_layer=False)

    return [
        ("gpt2", "decoder", gpt2),
        ("llama", "decoder", llama),
        ("opt", "decoder", opt),
        ("qwen2", "decoder", qwen2),
        ("mistral", "decoder", mistral),
        ("gpt_neox", "decoder", gpt_neox),
        ("phi", "decoder", phi),
        ("gemma", "decoder", gemma),
        ("bert", "encoder", bert),
        ("roberta", "encoder", roberta),
        ("distilbert", "encoder", distilbert),
        ("electra", "encoder", electra),
        ("vit", "vision", vit),
    ]


def nanogpt_class():
    """A GPT-2 in nanoGPT's layout: token and learned position embeddings,
    pre-LN blocks with a fused qkv Linear, SDPA with is_causal, tanh GELU,
    a final LayerNorm and a head tied to the token embedding."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln_1 = nn.LayerNorm(d)
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.ln_2 = nn.LayerNorm(d)
            self.c_fc = nn.Linear(d, 4 * d)
            self.mlp_proj = nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
            k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
            v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class NanoGPT(nn.Module):
        def __init__(self, vocab, block, layers, heads, d):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(block, d)
            self.h = nn.ModuleList([Block(d, heads) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied

        def forward(self, idx):
            t = idx.shape[1]
            pos = torch.arange(t, dtype=torch.long, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.h:
                x = blk(x)
            return self.lm_head(self.ln_f(x))

    return NanoGPT


def make_wrapper(model, kind, input_names, ones_mask=False):
    """The nn.Module the exporters see: the model called with its named
    inputs (an explicit signature, so both exporters name them), returning
    one tensor: decoders the logits (use_cache off), others the last hidden
    state. ones_mask: decoders get an all-ones attention mask built in the
    graph (transformers 5 looks for packed sequences with torch.diff when
    no mask is given, which the TorchScript exporter cannot export)."""
    import torch
    import torch.nn as nn

    def call(kw):
        if kind == "nanogpt":
            return model(kw["input_ids"])
        if kind == "decoder":
            if ones_mask:
                kw = dict(kw, attention_mask=torch.ones_like(kw["input_ids"]))
            return model(**kw, use_cache=False).logits
        return model(**kw).last_hidden_state

    names = tuple(input_names)
    if names == ("input_ids",):
        class W(nn.Module):
            def forward(self, input_ids):
                return call(dict(input_ids=input_ids))
    elif names == ("input_ids", "attention_mask"):
        class W(nn.Module):
            def forward(self, input_ids, attention_mask):
                return call(dict(input_ids=input_ids, attention_mask=attention_mask))
    elif names == ("input_ids", "attention_mask", "token_type_ids"):
        class W(nn.Module):
            def forward(self, input_ids, attention_mask, token_type_ids):
                return call(dict(input_ids=input_ids, attention_mask=attention_mask,
                                 token_type_ids=token_type_ids))
    elif names == ("pixel_values",):
        class W(nn.Module):
            def forward(self, pixel_values):
                return call(dict(pixel_values=pixel_values))
    else:
        raise ValueError(f"no wrapper for inputs {names}")
    w = W()
    w.m = model  # registers the model's parameters under "m."
    return w


# ---------------------------------------------------------------- data


def make_inputs(kind, seed, rows):
    """Inputs for `rows` samples: ids (and encoder masks with padding at the
    end of every other row, token types), or images."""
    import torch
    g = torch.Generator().manual_seed(seed)
    if kind == "vision":
        return {"pixel_values": torch.randn((rows, 3, 16, 16), generator=g)}
    ids = torch.randint(2, VOCAB, (rows, SEQ), generator=g, dtype=torch.long)
    if kind in ("decoder", "nanogpt"):
        return {"input_ids": ids}
    mask = torch.ones((rows, SEQ), dtype=torch.long)
    mask[1::2, SEQ - 5:] = 0  # right padding on odd rows
    return {"input_ids": ids, "attention_mask": mask}


def encoder_inputs_for(name, inputs):
    import torch
    if name in ("bert", "electra"):
        tt = torch.zeros_like(inputs["input_ids"])
        tt[:, SEQ // 2:] = 1
        return {**inputs, "token_type_ids": tt}
    return inputs


def shifted_labels(ids):
    labels = ids.clone()
    labels[:, :-1] = ids[:, 1:]
    labels[:, -1] = -100
    return labels


def loss_of(kind, out, batch):
    import torch.nn.functional as F
    if kind in ("decoder", "nanogpt"):
        v = out.shape[-1]
        return F.cross_entropy(out.reshape(-1, v), batch["labels"].reshape(-1), ignore_index=-100)
    return F.mse_loss(out, batch["target"])


# ---------------------------------------------------------------- export


def export(wrapper, args, input_names, output_name, path, exporter, opset=None):
    import onnx
    import torch
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            kw = dict(dynamo=True, input_names=input_names, output_names=[output_name],
                      external_data=False)
            if opset is not None:
                kw["opset_version"] = opset
            torch.onnx.export(wrapper, args, path, **kw)
        else:
            torch.onnx.export(wrapper, args, path, dynamo=False, opset_version=TORCHSCRIPT_OPSET,
                              input_names=input_names, output_names=[output_name],
                              do_constant_folding=True)
    model = strip_node_metadata(onnx.load(path))
    onnx.save(model, path)
    onnx.checker.check_model(model, full_check=True)
    return model


def ort_agreement(path, feeds, ref):
    try:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        got = sess.run(None, {k: v.numpy() for k, v in feeds.items()})[0]
        return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))
    except Exception as e:  # recorded, not fatal: ORT is a witness only
        return "onnxruntime failed: " + str(e).splitlines()[0][:200]


def op_histogram(model):
    h = collections.Counter()
    for n in model.graph.node:
        h[(n.domain or "") + ("::" if n.domain else "") + n.op_type] += 1
    return dict(sorted(h.items()))


def opset_of(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return None


# ---------------------------------------------------------------- one export


def build_export(out_root, name, kind, build, exporter, seed, opset=None, variant=""):
    """Writes one export's folder; returns a summary dict."""
    import torch
    torch.manual_seed(seed)
    folder_name = f"{name}_{exporter}{variant}"
    folder = os.path.join(out_root, folder_name)
    shutil.rmtree(folder, ignore_errors=True)
    model = build()
    model.eval()
    distinct_weights(model, seed)

    rows = make_inputs(kind, seed + 1, TRAIN_SAMPLES)
    if kind == "encoder":
        rows = encoder_inputs_for(name, rows)
    input_names = list(rows)
    first = {k: v[:BATCH] for k, v in rows.items()}
    output_name = "logits" if kind in ("decoder", "nanogpt") else "last_hidden_state"
    ones_mask = exporter == "torchscript" and kind == "decoder"
    wrapper = make_wrapper(model, kind, input_names, ones_mask).eval()
    args = tuple(first[k] for k in input_names)

    onnx_model = export(wrapper, args, input_names, output_name,
                        os.path.join(folder, "model.onnx"), exporter, opset)
    with torch.no_grad():
        ref = wrapper(*args).float()

    for k, v in first.items():
        save_npy(os.path.join(folder, "inputs", k + ".npy"), v.numpy())
    save_npy(os.path.join(folder, "expected", output_name + ".npy"), ref.numpy())

    # training data: labels (decoders) or a random target (others)
    train = {k: v.numpy() for k, v in rows.items()}
    if kind in ("decoder", "nanogpt"):
        train["labels"] = shifted_labels(rows["input_ids"]).numpy()
        loss_kind = "cross-entropy"
    else:
        g = torch.Generator().manual_seed(seed + 2)
        train["target"] = torch.randn((TRAIN_SAMPLES,) + tuple(ref.shape[1:]), generator=g).numpy()
        loss_kind = "mse"
    save_npz(os.path.join(folder, "train.npz"), train)

    def batch_at(i):
        return {k: torch.from_numpy(v[i:i + BATCH]) for k, v in train.items()}

    # first-batch gradients, keyed by initializer
    init_map = initializer_params(onnx_model, wrapper)
    wrapper.train()
    wrapper.zero_grad()
    b0 = batch_at(0)
    loss = loss_of(kind, wrapper(*(b0[k] for k in input_names)), b0)
    loss.backward()
    params = dict(wrapper.named_parameters())
    grads = {}
    init_shapes = {i.name: tuple(i.dims) for i in onnx_model.graph.initializer}
    for init_name, (pname, how) in init_map.items():
        gr = params[pname].grad
        gr = torch.zeros_like(params[pname]) if gr is None else gr
        gr = gr.detach().numpy()
        if how == "transposed":
            gr = gr.T
        elif how == "rows":
            shape = init_shapes[init_name]
            gr = gr[:int(np.prod(shape)) // int(np.prod(gr.shape[1:]))].reshape(shape)
        grads[init_name] = np.ascontiguousarray(gr, dtype=np.float32)
    save_npz(os.path.join(folder, "expected", "grads.npz"), grads)
    save_npy(os.path.join(folder, "expected", "loss.npy"), np.array(loss.item(), np.float64))

    # which parameters have no initializer of their own (the exporter folded
    # them into something else): the gradient test cannot cover those
    matched = {p for p, _ in init_map.values()}
    unmatched = sorted(set(params) - matched)
    tied = collections.defaultdict(list)
    for init_name, (pname, _) in init_map.items():
        tied[pname].append(init_name)
    float_consts = []
    import onnx.numpy_helper
    for init in onnx_model.graph.initializer:
        if init.name in init_map:
            continue
        if onnx.numpy_helper.to_array(init).dtype in (np.float32, np.float16):
            float_consts.append(init.name)

    # AdamW curve from the same weights
    torch.manual_seed(seed)
    trained = build()
    distinct_weights(trained, seed)
    tw = make_wrapper(trained, kind, input_names, ones_mask)
    tw.train()
    opt = torch.optim.AdamW(tw.parameters(), **ADAMW)
    losses = []
    for s in range(ADAMW_STEPS):
        b = batch_at(BATCH * (s % (TRAIN_SAMPLES // BATCH)))
        opt.zero_grad()
        lo = loss_of(kind, tw(*(b[k] for k in input_names)), b)
        losses.append(lo.item())
        lo.backward()
        opt.step()
    save_npy(os.path.join(folder, "expected", "adamw_loss.npy"), np.array(losses, np.float64))

    meta = {
        "architecture": name,
        "kind": kind,
        "exporter": exporter,
        "opset": opset_of(onnx_model),
        "torch": torch.__version__,
        "seed": seed,
        "inputs": {k: {"dtype": str(v.numpy().dtype), "shape": list(v.shape)} for k, v in first.items()},
        "outputs": {output_name: {"dtype": "float32", "shape": list(ref.shape)}},
        "loss": loss_kind,
        "batch": BATCH,
        "adamw": {**ADAMW, "betas": list(ADAMW["betas"]), "steps": ADAMW_STEPS},
        "params": {k: {"torch": p, "how": how} for k, (p, how) in sorted(init_map.items())},
        "tied": sorted(sorted(v) for v in tied.values() if len(v) > 1),
        "params_without_initializer": unmatched,
        "float_constants": sorted(float_consts),
        "ops": op_histogram(onnx_model),
        "onnxruntime_rel_l2": ort_agreement(os.path.join(folder, "model.onnx"), first, ref.numpy()),
    }

    if kind in ("decoder", "nanogpt"):
        ids = first["input_ids"][:, :GREEDY_PROMPT]
        meta["greedy"] = {"prompt": GREEDY_PROMPT, "new": GREEDY_NEW,
                          "how": "argmax of the last logits, whole sequence recomputed per token"}
        with torch.no_grad():
            seq = ids
            for _ in range(GREEDY_NEW):
                nxt = wrapper(seq)[:, -1, :].argmax(-1, keepdim=True)
                seq = torch.cat([seq, nxt], dim=1)
        save_npy(os.path.join(folder, "expected", "greedy_ids.npy"), seq.numpy())
        if kind == "decoder":
            try:
                with torch.no_grad():
                    hf = model.generate(ids, max_new_tokens=GREEDY_NEW, do_sample=False,
                                        eos_token_id=None, pad_token_id=0)
                meta["greedy"]["hf_generate_equal"] = bool(torch.equal(hf, seq))
            except Exception as e:
                meta["greedy"]["hf_generate_equal"] = "generate failed: " + str(e).splitlines()[0][:200]

    save_json(os.path.join(folder, "meta.json"), meta)
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(folder) for f in fs)
    return {"export": folder_name, "bytes": size, "onnx_bytes": os.path.getsize(os.path.join(folder, "model.onnx")),
            "nodes": len(onnx_model.graph.node), "ort": meta["onnxruntime_rel_l2"],
            "unmatched": unmatched, "tied": meta["tied"], "loss0": losses[0], "loss_last": losses[-1]}


def nanogpt_builder(layers, heads, d, vocab, block):
    def build():
        return nanogpt_class()(vocab, block, layers, heads, d)
    return build


def plan(only):
    """Every export: (name, kind, build, exporter, seed, opset, variant)."""
    jobs = []
    seed = 100
    for name, kind, build in hf_models():
        seed += 10
        for exporter in ("dynamo", "torchscript"):
            jobs.append((name, kind, build, exporter, seed, None, ""))
    # the ONNX Attention op (opset 23) from the dynamo exporter
    jobs.append(("llama", "decoder", dict((n, b) for n, _, b in hf_models())["llama"], "dynamo",
                 120, 23, "_op23"))
    # nanoGPT layout: 12 blocks, as GPT-2 124M, at a width CI can hold
    for exporter in ("dynamo", "torchscript"):
        jobs.append(("nanogpt12", "nanogpt", nanogpt_builder(12, 4, 32, VOCAB, 64), exporter, 300, None, ""))
    if only:
        jobs = [j for j in jobs if j[0] in only]
    return jobs


def run_job(args):
    """One export, in a worker process: (summary or None, failure or None,
    log lines)."""
    out_root, only, i = args
    import torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    name, kind, build, exporter, seed, opset, variant = plan(only)[i]
    t0 = time.time()
    try:
        s = build_export(out_root, name, kind, build, exporter, seed, opset, variant)
        s["seconds"] = round(time.time() - t0, 1)
        line = (f"ok   {s['export']:28s} {s['onnx_bytes']/1e3:7.1f} kB onnx, {s['bytes']/1e3:7.1f} kB all, "
                f"{s['nodes']:4d} nodes, ort {s['ort']}, loss {s['loss0']:.4f}->{s['loss_last']:.4f}, "
                f"tied {s['tied']}, unmatched {s['unmatched']}, {s['seconds']} s")
        return s, None, [line]
    except Exception as e:
        export_name = f"{name}_{exporter}{variant}"
        shutil.rmtree(os.path.join(out_root, export_name), ignore_errors=True)
        msg = [m for m in str(e).strip().splitlines() if m.strip()]
        f = {"export": export_name, "error": (msg[-1] if msg else repr(e))[:300]}
        return None, f, [f"FAIL {export_name}: {f['error']}", traceback.format_exc(limit=4)]


def generate(out_root, only, log, jobs=1):
    """Makes every export of plan(only) under out_root (in `jobs` worker
    processes; each export seeds itself, so the bytes do not depend on the
    order) and writes index.json."""
    n = len(plan(only))
    work = [(out_root, only, i) for i in range(n)]
    if jobs > 1:
        import multiprocessing
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            results = pool.map(run_job, work, chunksize=1)
    else:
        results = [run_job(w) for w in work]
    summary, failures = [], []
    for s, f, lines in results:
        for line in lines:
            log(line)
        if s:
            summary.append(s)
        if f:
            failures.append(f)
    total = sum(s["bytes"] for s in summary)
    index = {"exports": sorted(s["export"] for s in summary),
             "not_exported": sorted(failures, key=lambda f: f["export"]),
             "total_bytes": total}
    save_json(os.path.join(out_root, "index.json"), index)
    log(f"{len(summary)} exports, {len(failures)} failed, {total/1e6:.2f} MB")
    return index


def tree_digest(root):
    out = {}
    for dp, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(dp, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def gpt2_124m(out_dir, log, batch=8, seq=1024):
    """The full nanoGPT GPT-2 124M (vocab 50304, 12 x 768, block 1024) with
    both exporters, inputs [batch, seq]; weights as nanoGPT initializes
    them (normal 0.02), not distinct ones: this model is for speed and the
    loss curve, not for gradient matching."""
    import torch
    torch.manual_seed(1234)
    model = nanogpt_class()(50304, 1024, 12, 12, 768).eval()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
    w = make_wrapper(model, "nanogpt", ["input_ids"]).eval()
    ids = torch.randint(0, 50257, (batch, seq), generator=torch.Generator().manual_seed(5))
    for exporter in ("dynamo", "torchscript"):
        path = os.path.join(out_dir, f"gpt2_124m_{exporter}", "model.onnx")
        t0 = time.time()
        try:
            export(w, (ids,), ["input_ids"], "logits", path, exporter)
            log(f"ok   {path} {os.path.getsize(path)/1e6:.1f} MB, {time.time()-t0:.1f} s")
        except Exception as e:
            log(f"FAIL {path}: {str(e).splitlines()[-1][:300] if str(e) else repr(e)}")
    save_npy(os.path.join(out_dir, "input_ids.npy"), ids.numpy())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=ROOT, help="where the export folders go (default: this folder)")
    ap.add_argument("--only", nargs="*", help="architectures to (re)make")
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary folder and compare with --out byte for byte")
    ap.add_argument("--gpt2-124m", metavar="DIR", help="export the full GPT-2 124M into DIR")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    a = ap.parse_args()

    def log(msg):
        print(msg, flush=True)

    if a.gpt2_124m:
        gpt2_124m(a.gpt2_124m, log)
        return 0
    if a.check:
        tmp = tempfile.mkdtemp(prefix="zoo-check-")
        generate(tmp, a.only, log, a.jobs)
        got = tree_digest(tmp)
        made = {k.split("/")[0] for k in got}
        want = {k: v for k, v in tree_digest(a.out).items() if k.split("/")[0] in made}
        if a.only:
            got.pop("index.json", None)
            want.pop("index.json", None)
        diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
        shutil.rmtree(tmp, ignore_errors=True)
        for k in diff:
            log(f"differs: {k}")
        log("byte-for-byte: " + ("same" if not diff else f"{len(diff)} files differ"))
        return 1 if diff else 0
    generate(a.out, a.only, log, a.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
