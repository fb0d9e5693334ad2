#!/bin/sh
# run_kv_models.sh - one device call: export the tiny Hugging Face decoders
# with a KV cache (GPT-2, Llama with GQA) and Hugging Face's greedy
# generate ids for them (bench/gpu/make_kv_models.py), and bring them back
# as $OUT/kv.tgz with the log in $OUT/kv_models.log.
#
#   device run: sh bench/gpu/run_kv_models.sh
#   here:       tar xzf <files_at>/kv.tgz -C models/   (models/kv/; review
#               meta.json and index.json, then commit: tests/exec/
#               test_generate.c's hf_generate_references runs on them)
set -u
out=${OUT:?run this on the device machine, where OUT is set}
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
{
    python3 -c 'import torch, transformers, onnx; print("torch", torch.__version__, "transformers", transformers.__version__, "onnx", onnx.__version__)'
    python3 -c 'import onnxruntime as o; print("onnxruntime", o.__version__)' || echo "no onnxruntime: exports are not checked against it"
    python3 "$here/make_kv_models.py" --out "$out/kv"
    echo "exit status $?"
    cat "$out/kv/index.json"
    du -ab "$out/kv" | sort -n | tail -n 40
} > "$out/kv_models.log" 2>&1
tar czf "$out/kv.tgz" -C "$out" kv && rm -rf "$out/kv"
grep -v -i warning "$out/kv_models.log" | tail -n 60
