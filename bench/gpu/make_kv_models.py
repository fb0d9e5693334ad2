#!/usr/bin/env python3
"""Exports Hugging Face decoders with a KV cache for `teexec generate`
(issue 18), with Hugging Face's own greedy `generate` ids as references.

    python3 bench/gpu/make_kv_models.py --out DIR            # the tiny models
    python3 bench/gpu/make_kv_models.py --bench-models DIR   # GPT-2 124M and a
                                                             # ~1B Llama (never
                                                             # committed)

Needs torch (2.11), transformers (5.x), onnx and, for the checks,
onnxruntime; none are Debian packages, so this runs on the lent GPU
machine. No network: every model is built from a config with seeded random
weights. Everything runs on the CPU in float32 (the references do not
depend on the GPU).

Each model is exported with the Optimum / Hugging Face KV-cache convention
teexec's generator recognizes:

  inputs   input_ids [batch, seq] int64, attention_mask [batch, past + seq]
           int64, position_ids [batch, seq] int64,
           past_key_values.N.key / .value [batch, kv_heads, past, head_dim]
  outputs  logits [batch, seq, vocab], present.N.key / .value
           [batch, kv_heads, past + seq, head_dim]

by a wrapper module that builds a transformers DynamicCache from the past
tensors and flattens the returned cache. Export strategies, tried in order
until one gives a model whose batch / seq / past dims are symbolic and that
ONNX Runtime runs with an empty past, with a past of 8 and with masked
columns (within 1e-4 of PyTorch): torch.onnx.export(dynamo=True) with Dim.AUTO dynamic shapes,
dynamo=True with dynamic_axes, dynamo=False (TorchScript, opset 17) with
dynamic_axes. meta.json records every attempt and which one was kept.

Per model, DIR/<name>/ holds (the tiny ones are a few hundred KB):
  model.onnx                 weights inline
  meta.json                  config, the exporter used, every attempt,
                             input/output names and shapes, ORT's agreement,
                             whether HF generate equals a manual KV loop
  prompt.npy                 int64 [2, 8]: two prompts of 8 tokens
  hf_greedy_ids.npy          int64 [2, 8 + 32]: HF generate, greedy
  prompt_padded.npy          int64 [2, 8]: rows of 8 and 5 tokens, -1 after
                             a row's end (the `teexec generate --prompt`
                             format)
  hf_greedy_padded_new.npy   int64 [2, 32]: HF generate on those rows,
                             left-padded with an attention mask: new tokens
                             (only when HF's short row equals that row
                             alone; else ..._inconsistent.npy)
  inputs/<input>.npy         a prefill (past length 0) of prompt.npy ...
  expected/<output>.npy      ... and PyTorch's outputs (logits, presents)
  inputs_step/, expected_step/  one decode step after it (past length 8)

The script handles every model separately: a failure is printed and
recorded in DIR/index.json, and the others still run. Exit status 0 when
every model was written, 1 otherwise.
"""
import argparse
import json
import math
import os
import sys
import time
import traceback
import warnings

import numpy as np

PROMPT = 8
NEW = 32
PADDED_SHORT = 5
TORCHSCRIPT_OPSET = 17


def log(msg):
    print(msg, flush=True)


def save_npy(path, arr):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        np.save(f, np.ascontiguousarray(arr), allow_pickle=False)


def save_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True, default=str)
        f.write("\n")


def short(e):
    s = str(e).strip().splitlines()
    return (s[-1] if s else repr(e))[:400]


# ------------------------------------------------------------------ models


def tiny_configs():
    """name -> (builder, vocab): a tiny GPT-2 and a tiny Llama with GQA."""
    import transformers as tf

    def gpt2():
        cfg = tf.GPT2Config(vocab_size=512, n_positions=128, n_embd=64, n_layer=2, n_head=4,
                            n_inner=128, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                            bos_token_id=0, eos_token_id=0, pad_token_id=0)
        return tf.GPT2LMHeadModel(cfg)

    def llama():
        cfg = tf.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             head_dim=16, max_position_embeddings=128, rms_norm_eps=1e-6,
                             tie_word_embeddings=False, bos_token_id=0, eos_token_id=0,
                             pad_token_id=0)
        return tf.LlamaForCausalLM(cfg)

    return {"gpt2_kv": (gpt2, 512), "llama_gqa_kv": (llama, 512)}


def bench_configs():
    """The benchmark's models: GPT-2 124M and a Llama of about 1.1B
    parameters (TinyLlama's shape: 22 layers of 2048, 32 heads over 4 kv
    heads, SwiGLU 5632, vocabulary 32000)."""
    import transformers as tf

    def gpt2_124m():
        return tf.GPT2LMHeadModel(tf.GPT2Config(
            vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
            pad_token_id=0))

    def llama_1b():
        return tf.LlamaForCausalLM(tf.LlamaConfig(
            vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
            num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048,
            rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0,
            pad_token_id=0))

    return {"gpt2_124m_kv": (gpt2_124m, 50257), "llama_1b_kv": (llama_1b, 32000)}


def seeded_weights(model, seed, std=None):
    """Random weights from a fixed seed: matrices N(0, 1/fan_in) (or
    N(0, std)), norm gains near 1, other vectors near 0. Larger than HF's
    default init, so the logits spread and greedy ids are not near-ties."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                base = 1.0 if "norm" in name or name.endswith(("ln_1.weight", "ln_2.weight",
                                                                "ln_f.weight")) else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
            else:
                s = std if std is not None else 1.0 / math.sqrt(max(p.shape[-1], 1))
                p.copy_(torch.randn(p.shape, generator=g) * s)


def use_eager(model):
    """Eager attention (MatMul, Softmax): plain ops both exporters handle
    and teexec lowers; recorded in meta.json."""
    try:
        model.set_attn_implementation("eager")
    except Exception:
        try:
            model.config._attn_implementation = "eager"
        except Exception:
            pass
    return getattr(model.config, "_attn_implementation", None)


def kv_geometry(model):
    cfg = model.config
    layers = getattr(cfg, "num_hidden_layers", None) or cfg.n_layer
    heads = getattr(cfg, "num_attention_heads", None) or cfg.n_head
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    hidden = getattr(cfg, "hidden_size", None) or cfg.n_embd
    head_dim = getattr(cfg, "head_dim", None) or hidden // heads
    return layers, kv_heads, head_dim


def cache_layers(cache, n):
    """[(key, value)] of a transformers cache, across its API versions."""
    out = []
    for i in range(n):
        if hasattr(cache, "layers"):
            out.append((cache.layers[i].keys, cache.layers[i].values))
        elif hasattr(cache, "key_cache"):
            out.append((cache.key_cache[i], cache.value_cache[i]))
        else:
            out.append((cache[i][0], cache[i][1]))
    return out


def make_cache(model, past):
    """A DynamicCache holding the given [(key, value)] per layer."""
    from transformers import DynamicCache
    try:
        cache = DynamicCache(config=model.config)
    except TypeError:
        cache = DynamicCache()
    for i, (k, v) in enumerate(past):
        cache.update(k, v, i)
    return cache


def make_wrapper(model):
    """An nn.Module with flat tensor inputs (input_ids, attention_mask,
    position_ids, past_key_values_0_key, ...) returning (logits,
    present_0_key, ...), so both exporters see plain tensors."""
    import torch
    layers, _, _ = kv_geometry(model)
    args = ["input_ids", "attention_mask", "position_ids"]
    for i in range(layers):
        args += [f"past_key_values_{i}_key", f"past_key_values_{i}_value"]

    class KVWrapper(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def run(self, input_ids, attention_mask, position_ids, flat):
            past = [(flat[2 * i], flat[2 * i + 1]) for i in range(layers)]
            out = self.m(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=make_cache(self.m, past),
                         use_cache=True, return_dict=True)
            res = [out.logits]
            for k, v in cache_layers(out.past_key_values, layers):
                res += [k, v]
            return tuple(res)

    # an explicit signature (no *args), which torch.export wants
    src = ("def forward(self, " + ", ".join(args) + "):\n"
           "    return self.run(input_ids, attention_mask, position_ids, ["
           + ", ".join(args[3:]) + "])\n")
    ns = {}
    exec(src, ns)  # noqa: S102 - generated from the fixed names above
    KVWrapper.forward = ns["forward"]
    return KVWrapper(model).eval(), args


def io_names(layers):
    ins = ["input_ids", "attention_mask", "position_ids"]
    outs = ["logits"]
    for i in range(layers):
        ins += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        outs += [f"present.{i}.key", f"present.{i}.value"]
    return ins, outs


def sample_inputs(model, batch, past_len, seq, vocab, seed):
    """Inputs for one call: random ids, an all-ones mask, positions after
    the past, random past tensors."""
    import torch
    layers, kv_heads, head_dim = kv_geometry(model)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, past_len + seq, dtype=torch.int64)
    pos = (torch.arange(seq) + past_len).unsqueeze(0).expand(batch, seq).contiguous()
    flat = []
    for _ in range(layers):
        for _ in range(2):
            flat.append(torch.randn(batch, kv_heads, past_len, head_dim, generator=g))
    return [ids, mask, pos] + flat


# ------------------------------------------------------------------ export


def dims_ok(onnx_model, layers):
    """True when input_ids' two dims, attention_mask's two and every past's
    batch and length are symbolic, and kv_heads / head_dim are fixed."""
    def dims(v):
        return [(d.dim_param or None, d.dim_value if d.HasField("dim_value") else None)
                for d in v.type.tensor_type.shape.dim]
    ins = {v.name: dims(v) for v in onnx_model.graph.input}
    want = ["input_ids", "attention_mask", "position_ids"] + \
        [f"past_key_values.{i}.{w}" for i in range(layers) for w in ("key", "value")]
    problems = []
    for n in want:
        if n not in ins:
            problems.append(f"no input {n}")
            continue
        d = ins[n]
        sym = [p is not None or v is None for p, v in d]
        if n.startswith("past"):
            if len(d) != 4 or not (sym[0] and sym[2]) or sym[1] or sym[3]:
                problems.append(f"{n} dims {d}")
        elif len(d) != 2 or not all(sym):
            problems.append(f"{n} dims {d}")
    return problems


def try_export(wrapper, sample, in_names, out_names, path, strategy, large):
    import torch
    layers = (len(in_names) - 3) // 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if strategy == "dynamo_auto":
            A = torch.export.Dim.AUTO
            shapes = [{0: A, 1: A}, {0: A, 1: A}, {0: A, 1: A}] + [{0: A, 2: A}] * (2 * layers)
            torch.onnx.export(wrapper, tuple(sample), path, dynamo=True, input_names=in_names,
                              output_names=out_names, dynamic_shapes=tuple(shapes),
                              external_data=large)
        elif strategy == "dynamo_axes":
            torch.onnx.export(wrapper, tuple(sample), path, dynamo=True, input_names=in_names,
                              output_names=out_names, dynamic_axes=dynamic_axes(layers),
                              external_data=large)
        else:
            torch.onnx.export(wrapper, tuple(sample), path, dynamo=False,
                              opset_version=TORCHSCRIPT_OPSET, input_names=in_names,
                              output_names=out_names, dynamic_axes=dynamic_axes(layers),
                              do_constant_folding=True)


def dynamic_axes(layers):
    ax = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
          "position_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    for i in range(layers):
        for w in ("key", "value"):
            ax[f"past_key_values.{i}.{w}"] = {0: "batch", 2: "past"}
            ax[f"present.{i}.{w}"] = {0: "batch", 2: "total"}
    return ax


def ort_check(path, wrapper, model, vocab):
    """ONNX Runtime against PyTorch with an empty past, a past of 8, and a
    past of 8 whose first columns row 1 masks: the worst relative L2 error
    of any output per case."""
    import torch
    try:
        import onnxruntime as ort
    except Exception as e:  # not installed: no check, not a failure
        return {"skipped": short(e)}
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    layers, _, _ = kv_geometry(model)
    in_names, _ = io_names(layers)
    res = {}
    for past_len, padded in ((0, False), (8, False), (8, True)):
        x = sample_inputs(model, 2, past_len, 3, vocab, seed=100 + past_len)
        if padded:  # row 1's first columns masked: the mask must not have been traced away
            x[1][1, :3] = 0
        with torch.no_grad():
            ref = [t.numpy() for t in wrapper(*x)]
        got = sess.run(None, {n: t.numpy() for n, t in zip(in_names, x)})
        worst = 0.0
        for r, o in zip(ref, got):
            if r.shape != o.shape:
                raise RuntimeError(f"ORT output shape {o.shape} != PyTorch {r.shape}")
            worst = max(worst, float(np.linalg.norm(o - r) / max(np.linalg.norm(r), 1e-30)))
        res[f"past_{past_len}{'_padded' if padded else ''}_rel_l2"] = worst
    return res


def export_model(wrapper, model, vocab, path, attempts, large=False):
    """Tries each strategy; keeps the first good one. Returns its name."""
    import onnx
    layers, _, _ = kv_geometry(model)
    in_names, out_names = io_names(layers)
    sample = sample_inputs(model, 2, 3, 4, vocab, seed=7)  # no 0/1 sizes to specialize on
    for strategy in ("dynamo_auto", "dynamo_axes", "torchscript"):
        t0 = time.time()
        rec = {"strategy": strategy}
        attempts.append(rec)
        try:
            if os.path.exists(path):
                os.remove(path)
            try_export(wrapper, sample, in_names, out_names, path, strategy, large)
            m = onnx.load(path, load_external_data=False)
            rec["opset"] = max((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
                               default=None)
            problems = dims_ok(m, layers)
            if problems:
                rec["error"] = "dims: " + "; ".join(problems)[:400]
                continue
            if not large:
                m = onnx.load(path)
                for n in m.graph.node:  # the exporter's stack traces: bulk, no meaning
                    del n.metadata_props[:]
                onnx.save(m, path)
                try:  # strictness of the checker is not a reason to drop an export
                    onnx.checker.check_model(m, full_check=True)
                    rec["checker"] = "ok"
                except Exception as e:
                    rec["checker"] = short(e)
                rec["ort"] = ort_check(path, wrapper, model, vocab)
                bad = [v for k, v in rec["ort"].items() if k.endswith("rel_l2") and not v < 1e-4]
                if bad:
                    rec["error"] = f"ORT disagrees with PyTorch: {rec['ort']}"
                    continue
            rec["ok"] = True
            rec["seconds"] = round(time.time() - t0, 1)
            return strategy
        except Exception as e:
            rec["error"] = short(e)
            rec["seconds"] = round(time.time() - t0, 1)
            log(f"    {strategy}: {rec['error']}")
    return None


# ------------------------------------------------------------------ references


def manual_greedy(wrapper, model, ids, new):
    """Greedy decoding through the wrapper (prefill, then one token at a
    time with the returned presents as the past)."""
    import torch
    layers, kv_heads, head_dim = kv_geometry(model)
    b, t = ids.shape
    flat = [torch.zeros(b, kv_heads, 0, head_dim) for _ in range(2 * layers)]
    seq = ids
    cur = ids
    with torch.no_grad():
        for _ in range(new):
            past = flat[0].shape[2]
            mask = torch.ones(b, past + cur.shape[1], dtype=torch.int64)
            pos = (torch.arange(cur.shape[1]) + past).unsqueeze(0).expand(b, -1).contiguous()
            out = wrapper(cur, mask, pos, *flat)
            nxt = out[0][:, -1, :].argmax(-1, keepdim=True)
            flat = list(out[1:])
            seq = torch.cat([seq, nxt], 1)
            cur = nxt
    return seq


def hf_generate(model, ids, mask, new):
    import torch
    with torch.no_grad():
        return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new,
                              min_new_tokens=new, do_sample=False, eos_token_id=None,
                              pad_token_id=0, use_cache=True)


def write_call(folder, sub, names, tensors):
    for n, t in zip(names, tensors):
        save_npy(os.path.join(folder, sub, n + ".npy"), t.detach().numpy())


def make_tiny(out, name, build, vocab, seed):
    import torch
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    torch.set_num_threads(1)  # the references: one thread, fixed seeds
    torch.manual_seed(seed)
    model = build().eval()
    use_eager(model)
    seeded_weights(model, seed)
    wrapper, _ = make_wrapper(model)
    layers, kv_heads, head_dim = kv_geometry(model)
    meta = {"name": name, "architecture": type(model).__name__, "config": model.config.to_dict(),
            "layers": layers, "kv_heads": kv_heads, "head_dim": head_dim, "vocab": vocab,
            "seed": seed, "torch": torch.__version__,
            "attn_implementation": getattr(model.config, "_attn_implementation", None)}
    try:
        import transformers
        import onnx
        meta["transformers"] = transformers.__version__
        meta["onnx"] = onnx.__version__
    except Exception:
        pass
    attempts = []
    meta["attempts"] = attempts
    path = os.path.join(folder, "model.onnx")
    try:
        meta["exporter"] = export_model(wrapper, model, vocab, path, attempts)
    finally:
        save_json(os.path.join(folder, "meta.json"), meta)
    if not meta["exporter"]:
        raise RuntimeError("no export strategy worked: " +
                           "; ".join(f"{a['strategy']}: {a.get('error')}" for a in attempts))
    in_names, out_names = io_names(layers)
    g = torch.Generator().manual_seed(seed + 1)
    prompt = torch.randint(1, vocab, (2, PROMPT), generator=g)
    save_npy(os.path.join(folder, "prompt.npy"), prompt.numpy())

    # the prefill and one decode step, as teexec run inputs and expectations
    zeros = [torch.zeros(2, kv_heads, 0, head_dim) for _ in range(2 * layers)]
    pre = [prompt, torch.ones(2, PROMPT, dtype=torch.int64),
           torch.arange(PROMPT).unsqueeze(0).expand(2, -1).contiguous()] + zeros
    with torch.no_grad():
        pre_out = wrapper(*pre)
    write_call(folder, "inputs", in_names, pre)
    write_call(folder, "expected", out_names, pre_out)
    nxt = pre_out[0][:, -1, :].argmax(-1, keepdim=True)
    step = [nxt, torch.ones(2, PROMPT + 1, dtype=torch.int64),
            torch.full((2, 1), PROMPT, dtype=torch.int64)] + list(pre_out[1:])
    with torch.no_grad():
        step_out = wrapper(*step)
    write_call(folder, "inputs_step", in_names, step)
    write_call(folder, "expected_step", out_names, step_out)

    # greedy references
    mine = manual_greedy(wrapper, model, prompt, NEW)
    meta["greedy"] = {"prompt": PROMPT, "new": NEW}
    try:
        hf = hf_generate(model, prompt, torch.ones_like(prompt), NEW)
        save_npy(os.path.join(folder, "hf_greedy_ids.npy"), hf.numpy())
        meta["greedy"]["hf_equals_manual_kv_loop"] = bool(torch.equal(hf, mine))
    except Exception as e:
        meta["greedy"]["hf_generate_error"] = short(e)
        save_npy(os.path.join(folder, "hf_greedy_ids.npy"), mine.numpy())
        meta["greedy"]["hf_greedy_ids_from"] = "manual KV loop (HF generate failed)"
    # rows of 8 and 5 tokens: HF left-pads with an attention mask
    padded = torch.full((2, PROMPT), -1, dtype=torch.int64)
    padded[0] = prompt[0]
    padded[1, :PADDED_SHORT] = prompt[1, :PADDED_SHORT]
    save_npy(os.path.join(folder, "prompt_padded.npy"), padded.numpy())
    left = torch.zeros(2, PROMPT, dtype=torch.int64)
    lmask = torch.zeros(2, PROMPT, dtype=torch.int64)
    left[0] = prompt[0]
    lmask[0] = 1
    left[1, PROMPT - PADDED_SHORT:] = prompt[1, :PADDED_SHORT]
    lmask[1, PROMPT - PADDED_SHORT:] = 1
    try:
        hp = hf_generate(model, left, lmask, NEW)
        # the short row alone must give the same tokens; only then is the
        # padded batch a reference (teexec's padded rows equal them alone)
        alone = hf_generate(model, prompt[1:2, :PADDED_SHORT],
                            torch.ones(1, PADDED_SHORT, dtype=torch.int64), NEW)
        same = bool(torch.equal(alone[0, PADDED_SHORT:], hp[1, PROMPT:]))
        meta["greedy"]["padded_row_equals_alone"] = same
        save_npy(os.path.join(folder, "hf_greedy_padded_new.npy" if same else
                              "hf_greedy_padded_new_inconsistent.npy"), hp[:, PROMPT:].numpy())
    except Exception as e:
        meta["greedy"]["hf_padded_error"] = short(e)
    meta["inputs"] = {n: list(t.shape) for n, t in zip(in_names, pre)}
    meta["outputs"] = {n: list(t.shape) for n, t in zip(out_names, pre_out)}
    meta["bytes"] = sum(os.path.getsize(os.path.join(dp, f))
                        for dp, _, fs in os.walk(folder) for f in fs)
    save_json(os.path.join(folder, "meta.json"), meta)
    return meta


def make_bench(out, name, build, vocab, seed):
    """A full-size export (external data) for run_generate_bench.sh, and
    the model's weights as a state dict so the HF side loads the same."""
    import torch
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    torch.set_num_threads(os.cpu_count() or 1)  # size, not bit-exactness, matters here
    torch.manual_seed(seed)
    model = build().eval()
    seeded_weights(model, seed, std=0.02)
    torch.save(model.state_dict(), os.path.join(folder, "weights.pt"))
    model.config.save_pretrained(folder)  # config.json, for AutoConfig.from_pretrained
    use_eager(model)
    wrapper, _ = make_wrapper(model)
    attempts = []
    meta = {"name": name, "attempts": attempts, "vocab": vocab, "seed": seed,
            "params": sum(p.numel() for p in model.parameters())}
    try:
        meta["exporter"] = export_model(wrapper, model, vocab, os.path.join(folder, "model.onnx"),
                                        attempts, large=True)
    finally:
        save_json(os.path.join(folder, "meta.json"), meta)
    if not meta["exporter"]:
        raise RuntimeError("no export strategy worked")
    return meta


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="write the tiny models here")
    ap.add_argument("--bench-models", metavar="DIR", help="write the benchmark's models here")
    ap.add_argument("--only", nargs="*", help="model names to make")
    a = ap.parse_args()
    if not a.out and not a.bench_models:
        ap.error("give --out or --bench-models")
    try:
        import torch
        import transformers
        log(f"torch {torch.__version__}, transformers {transformers.__version__}")
    except Exception as e:
        log(f"FAIL: cannot import torch/transformers: {short(e)}")
        return 1
    jobs = []
    if a.out:
        jobs += [(a.out, n, b, v, 1000 + i, make_tiny)
                 for i, (n, (b, v)) in enumerate(tiny_configs().items())]
    if a.bench_models:
        jobs += [(a.bench_models, n, b, v, 2000 + i, make_bench)
                 for i, (n, (b, v)) in enumerate(bench_configs().items())]
    index = {}
    for out, name, build, vocab, seed, fn in jobs:
        if a.only and name not in a.only:
            continue
        t0 = time.time()
        log(f"== {name}")
        try:
            meta = fn(out, name, build, vocab, seed)
            index[name] = {"ok": True, "exporter": meta.get("exporter"),
                           "greedy": meta.get("greedy"), "bytes": meta.get("bytes"),
                           "seconds": round(time.time() - t0, 1)}
            log(f"ok   {name}: exporter {meta.get('exporter')}, greedy {meta.get('greedy')}, "
                f"{meta.get('bytes')} bytes, {time.time() - t0:.1f} s")
        except Exception as e:
            index[name] = {"ok": False, "error": short(e), "seconds": round(time.time() - t0, 1)}
            log(f"FAIL {name}: {short(e)}")
            traceback.print_exc()
        save_json(os.path.join(out, "index.json"), index)
    return 0 if index and all(v["ok"] for v in index.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
