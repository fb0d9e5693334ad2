#!/usr/bin/env python3
"""Generation speed on the GPU: `teexec generate` against Hugging Face
`generate` (eager with its dynamic cache, and its static cache under
torch.compile) on the same weights, in one run (issue 18).

    python3 bench/gpu/generate_bench.py --teexec .carry/lead/teexec \\
        --models WORK --out OUT [--batches 1 16] [--prompt 128] [--new 128] \\
        [--dtypes fp32 bf16] [--only gpt2_124m_kv] [--no-compile]

WORK is what `make_kv_models.py --bench-models WORK` wrote: per model
model.onnx (+ external data), weights.pt and config.json. For each model,
batch and dtype: a seeded prompt of --prompt tokens per row, then --new
greedy tokens (no stop), timed

  * teexec: `teexec generate --device cuda --json` (its own wall-clock
    figures: prefill ms, decode ms over new - 1 one-token runs, tokens/s);
  * HF eager: model.generate(..., min_new_tokens=new), the default dynamic
    cache: median of --iters calls after one warm-up;
  * HF static + torch.compile: cache_implementation="static" and
    model.forward compiled (mode reduce-overhead), two warm-up calls first.

And a bound: the time to read the weights and the KV cache (at the
midpoint length) once at the copy bandwidth measured here (a device to
device copy of 1 GiB), per decode step. Writes OUT/generate_bench.json and
OUT/generate_bench.md; prints the table. Every case is handled on its own:
a failure is recorded and the rest runs.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

import numpy as np


def log(msg):
    print(msg, flush=True)


def short(e):
    s = str(e).strip().splitlines()
    return (s[-1] if s else repr(e))[:300]


def copy_bandwidth():
    """Bytes per second of a 1 GiB device-to-device copy (read + write)."""
    import torch
    n = 1 << 28
    a = torch.empty(n, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        b.copy_(a)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return 2 * a.numel() * 4 / statistics.median(times)


def load_hf(folder, dtype):
    import torch
    import transformers as tf
    cfg = tf.AutoConfig.from_pretrained(folder)  # local files only: no network
    model = tf.AutoModelForCausalLM.from_config(cfg)
    sd = torch.load(os.path.join(folder, "weights.pt"), map_location="cpu")
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if [k for k in missing if "lm_head" not in k] or unexpected:
        raise RuntimeError(f"weights do not fit: missing {missing[:5]}, unexpected {unexpected[:5]}")
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    return model.eval().to("cuda", dtype=dtype)


def time_hf(model, ids, new, iters, warmup):
    import torch
    mask = torch.ones_like(ids)

    def call():
        with torch.no_grad():
            return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new,
                                  min_new_tokens=new, do_sample=False, eos_token_id=None,
                                  pad_token_id=0)
    out = None
    for _ in range(warmup):
        out = call()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        out = call()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def run_teexec(exe, model_path, prompt_path, new, dtype, env):
    cmd = [exe, "generate", model_path, "--prompt", prompt_path, "--max-new-tokens", str(new),
           "--device", "cuda", "--json"]
    if dtype == "bf16":
        cmd += ["--dtype", "bf16"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=500)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"teexec exit {p.returncode}: {p.stderr.strip()[-300:]}")
    res = json.loads(p.stdout)
    res["process_wall_s"] = wall
    return res


def convert_cache_form(exe, model_path, out_path, batch, capacity, env):
    """The export in DotProductAttention's cache mode; returns the summary.
    A cache form this function wrote before for the same model file, batch
    and capacity (its record beside it) is reused: the Llama's conversion
    takes a minute, and a run split over several device calls needs it once."""
    record = out_path + ".json"
    stamp = {"model_mtime": os.path.getmtime(model_path), "batch": batch, "capacity": capacity}
    if os.path.isfile(out_path) and os.path.isfile(record):
        with open(record) as f:
            old = json.load(f)
        if old.get("stamp") == stamp:
            old["reused"] = True
            return old
    cmd = [exe, "convert", model_path, out_path, "--kv-cache", f"{batch},{capacity}"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=500)
    if p.returncode != 0:
        raise RuntimeError(f"teexec convert exit {p.returncode}: {p.stderr.strip()[-300:]}")
    info = {"convert_s": time.perf_counter() - t0, "summary": p.stdout.strip()[-600:],
            "stamp": stamp}
    with open(record, "w") as f:
        json.dump(info, f)
    return info


def teexec_case(case, key, r, batch, new, hf_ids):
    """Records one teexec run under key (teexec / teexec_cache)."""
    case[key] = {k: r.get(k) for k in ("prefill_ms", "decode_ms", "per_token_ms",
                                       "median_step_ms", "max_step_ms", "tokens_per_s",
                                       "mode", "model_runs", "plans", "process_wall_s")}
    total_s = (r["prefill_ms"] + r["decode_ms"]) / 1e3
    case[key + "_total_s"] = total_s
    case[key + "_tokens_per_s"] = batch * new / total_s
    if hf_ids is not None:
        got = np.array(r["sequences"], dtype=np.int64)
        same = bool(got.shape == hf_ids.shape and (got == hf_ids).all())
        case["ids_equal_hf_eager" if key == "teexec" else f"{key}_ids_equal_hf_eager"] = same
        if got.shape == hf_ids.shape:
            diff = np.nonzero((got != hf_ids).any(0))[0]
            case["first_differing_step" if key == "teexec" else f"{key}_first_differing_step"] = (
                int(diff[0]) if len(diff) else None)
    return np.array(r["sequences"], dtype=np.int64)


SIDES = ("teexec", "hf-eager", "hf-compile")


def weight_bytes(folder):
    total = 0
    for f in os.listdir(folder):
        if f.startswith("model.") and f.endswith((".onnx", ".data")):  # not cache_form.*
            total += os.path.getsize(os.path.join(folder, f))
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teexec", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", type=int, nargs="*", default=[1, 16])
    ap.add_argument("--dtypes", nargs="*", default=["fp32", "bf16"])
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--no-cache-form", action="store_true")
    ap.add_argument("--sides", nargs="*", default=list(SIDES), choices=SIDES,
                    help="what to time (default all); a run too long for one device call "
                         "can be split by side, on the same WORK")
    ap.add_argument("--compile-modes", nargs="*", default=["reduce-overhead", "default"],
                    choices=["reduce-overhead", "default"],
                    help="torch.compile modes, tried in this order until one runs")
    a = ap.parse_args()
    if a.no_compile and "hf-compile" in a.sides:
        a.sides.remove("hf-compile")
    import torch
    os.makedirs(a.out, exist_ok=True)
    env = dict(os.environ)
    bw = copy_bandwidth()
    log(f"device {torch.cuda.get_device_name()}, copy bandwidth {bw / 1e9:.0f} GB/s")
    results = {"device": torch.cuda.get_device_name(), "copy_bandwidth_Bps": bw,
               "prompt": a.prompt, "new": a.new, "cases": []}
    names = sorted(d for d in os.listdir(a.models)
                   if os.path.isfile(os.path.join(a.models, d, "model.onnx")))
    for name in names:
        if a.only and name not in a.only:
            continue
        folder = os.path.join(a.models, name)
        with open(os.path.join(folder, "config.json")) as f:
            cfg = json.load(f)
        layers = cfg.get("num_hidden_layers") or cfg.get("n_layer")
        heads = cfg.get("num_attention_heads") or cfg.get("n_head")
        kv_heads = cfg.get("num_key_value_heads") or heads
        hidden = cfg.get("hidden_size") or cfg.get("n_embd")
        head_dim = cfg.get("head_dim") or hidden // heads
        vocab = cfg.get("vocab_size")
        fp32_weights = weight_bytes(folder)
        cache_model = None
        if not a.no_cache_form and "teexec" in a.sides:
            cache_model = os.path.join(folder, "cache_form.onnx")
            try:
                info = convert_cache_form(a.teexec, os.path.join(folder, "model.onnx"),
                                          cache_model, max(a.batches), a.prompt + a.new, env)
                results.setdefault("cache_form", {})[name] = info
                log(f"{name}: cache form {'reused' if info.get('reused') else 'converted'} "
                    f"in {info['convert_s']:.1f} s: "
                    f"{info['summary'][-200:]}")
            except Exception as e:
                results.setdefault("cache_form", {})[name] = {"error": short(e)}
                log(f"FAIL {name}: cache form: {short(e)}")
                cache_model = None
        for dtype in a.dtypes:
            tdt = torch.float32 if dtype == "fp32" else torch.bfloat16
            esize = 4 if dtype == "fp32" else 2
            hf = None
            try:
                if "hf-eager" in a.sides or "hf-compile" in a.sides:
                    hf = load_hf(folder, tdt)
            except Exception as e:
                log(f"FAIL {name} {dtype}: HF model: {short(e)}")
            for batch in a.batches:
                case = {"model": name, "dtype": dtype, "batch": batch}
                results["cases"].append(case)
                g = np.random.default_rng(1000 + batch)
                prompt = g.integers(1, vocab, size=(batch, a.prompt), dtype=np.int64)
                ppath = os.path.join(a.out, f"prompt_{name}_{batch}.npy")
                np.save(ppath, prompt)
                kv_mid = 2 * layers * batch * kv_heads * (a.prompt + a.new // 2) * head_dim * esize
                bound_s = (fp32_weights * esize / 4 + kv_mid) / bw
                case["bound_ms_per_token"] = bound_s * 1e3
                ids = torch.from_numpy(prompt).cuda()
                hf_ids = None
                if hf is not None and "hf-eager" in a.sides:
                    try:
                        t, out = time_hf(hf, ids, a.new, a.iters, 1)
                        hf_ids = out[:, a.prompt:].cpu().numpy()
                        case["hf_eager_s"] = t
                        case["hf_eager_tokens_per_s"] = batch * a.new / t
                    except Exception as e:
                        case["hf_eager_error"] = short(e)
                export_ids = None
                if "teexec" not in a.sides:
                    log(json.dumps(case))
                    continue
                try:
                    r = run_teexec(a.teexec, os.path.join(folder, "model.onnx"), ppath, a.new,
                                   dtype, env)
                    export_ids = teexec_case(case, "teexec", r, batch, a.new, hf_ids)
                except Exception as e:
                    case["teexec_error"] = short(e)
                if cache_model:
                    try:
                        r = run_teexec(a.teexec, cache_model, ppath, a.new, dtype, env)
                        got = teexec_case(case, "teexec_cache", r, batch, a.new, hf_ids)
                        if export_ids is not None:
                            case["cache_ids_equal_export"] = bool(
                                got.shape == export_ids.shape and (got == export_ids).all())
                    except Exception as e:
                        case["teexec_cache_error"] = short(e)
                log(json.dumps(case))
            if hf is not None and "hf-compile" in a.sides:
                try:
                    hf.generation_config.cache_implementation = "static"
                    eager_forward = hf.forward
                    modes = a.compile_modes
                    hf.forward = torch.compile(eager_forward, mode=modes[0], fullgraph=True)
                    for batch in a.batches:
                        case = next(c for c in results["cases"] if c["model"] == name and
                                    c["dtype"] == dtype and c["batch"] == batch)
                        prompt = np.load(os.path.join(a.out, f"prompt_{name}_{batch}.npy"))
                        # reduce-overhead (CUDA graphs) first by default; transformers
                        # 5's static cache can trip its overwrite check, then compile
                        # without graphs
                        for k, mode in enumerate(modes):
                            try:
                                t, _ = time_hf(hf, torch.from_numpy(prompt).cuda(), a.new,
                                               a.iters, 2)
                                case["hf_static_compile_s"] = t
                                case["hf_static_compile_tokens_per_s"] = batch * a.new / t
                                case["hf_static_compile_mode"] = mode
                                # a mode that failed first stays on record
                                err = case.pop("hf_static_compile_error", None)
                                if err:
                                    case["hf_static_compile_failed_first"] = err
                                break
                            except Exception as e:
                                case["hf_static_compile_error"] = f"{mode}: {short(e)}"
                                if k + 1 < len(modes):
                                    torch._dynamo.reset()
                                    hf.forward = torch.compile(eager_forward, mode=modes[k + 1],
                                                               fullgraph=True)
                        log(json.dumps(case))
                except Exception as e:
                    log(f"FAIL {name} {dtype}: torch.compile: {short(e)}")
            del hf
            torch.cuda.empty_cache()
        with open(os.path.join(a.out, "generate_bench.json"), "w") as f:
            json.dump(results, f, indent=1)
    lines = ["| model | dtype | batch | teexec tok/s | per-token ms | median step ms | "
             "cache form tok/s | cache form median step ms | "
             "bound ms | HF eager tok/s | HF static+compile tok/s | ids = HF | cache form ids = HF |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in results["cases"]:
        t = c.get("teexec", {})

        def f(v, fmt="{:.1f}"):
            return fmt.format(v) if isinstance(v, (int, float)) else "-"
        lines.append(f"| {c['model']} | {c['dtype']} | {c['batch']} | "
                     f"{f(c.get('teexec_tokens_per_s')) if t else c.get('teexec_error', '-')} | "
                     f"{f(t.get('per_token_ms'), '{:.2f}')} | {f(t.get('median_step_ms'), '{:.3f}')} | "
                     f"{f(c.get('teexec_cache_tokens_per_s')) if c.get('teexec_cache') else c.get('teexec_cache_error', '-')} | "
                     f"{f(c.get('teexec_cache', {}).get('median_step_ms'), '{:.3f}')} | "
                     f"{f(c.get('bound_ms_per_token'), '{:.3f}')} | "
                     f"{f(c.get('hf_eager_tokens_per_s'))} | "
                     f"{f(c.get('hf_static_compile_tokens_per_s'))}"
                     f"{' (' + c['hf_static_compile_mode'] + ')' if c.get('hf_static_compile_mode') else ''} | "
                     f"{c.get('ids_equal_hf_eager', '-')} | "
                     f"{c.get('teexec_cache_ids_equal_hf_eager', '-')} |")
    table = "\n".join(lines)
    with open(os.path.join(a.out, "generate_bench.md"), "w") as f:
        f.write(f"# Generation on {results['device']}\n\nprompt {a.prompt}, new {a.new}, copy "
                f"bandwidth {bw / 1e9:.0f} GB/s; tok/s = batch x new / (prefill + decode); "
                "bound = weights + KV cache at the midpoint read once per token at that "
                "bandwidth.\n\n" + table + "\n")
    log(table)
    with open(os.path.join(a.out, "generate_bench.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.exit(1)
