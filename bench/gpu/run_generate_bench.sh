#!/bin/bash
# Generation speed on the GPU machine, in one run (issue 18):
#  1. bench/gpu/make_kv_models.py --bench-models WORK: GPT-2 124M and a
#     ~1.1B Llama (GQA, TinyLlama's shape) from configs with seeded random
#     weights, exported with past_key_values inputs / present outputs
#     (external data), and their weights for Hugging Face;
#  2. bench/gpu/generate_bench.py: batch 1 and 16, a 128-token prompt then
#     128 new greedy tokens, fp32 and bf16: `teexec generate --device cuda
#     --json` against HF generate eager (dynamic cache) and HF's static
#     cache under torch.compile, on the same weights; each per-token time
#     against reading the weights and the KV cache once at the measured copy
#     bandwidth; whether teexec's ids equal HF's; and the same for the
#     cache form (`teexec convert --kv-cache MAXBATCH,PROMPT+NEW`: the
#     attention in DotProductAttention's cache mode, the caches session
#     state appended in place), converted once per model in WORK.
# Binaries from CARRY_DIR (bench/gpu/pack_carry.sh). The models stay in
# WORK (~5 GB for the Llama); OUT gets the logs, generate_bench.json and
# generate_bench.md (copy to bench/results/gpu_generate_<date>.md).
#
#   device run, carry .carry/lead(.tar.xz): bash bench/gpu/run_generate_bench.sh
#   env: ONLY="gpt2_124m_kv" BATCHES="1 16" DTYPES="fp32 bf16" PROMPT=128 NEW=128
#        NO_COMPILE=1 ITERS=3 WORK=/tmp/gen-bench AUTOTUNE=0 STAGE=all|export|bench
#        SIDES="teexec hf-eager hf-compile" COMPILE_MODES="reduce-overhead default"
#
# A device call lasts at most 10 minutes: if the whole run does not fit,
# split it while the machine stays warm (WORK survives between calls):
#   STAGE=export bash ...;  STAGE=bench ONLY=gpt2_124m_kv bash ...;
#   STAGE=bench ONLY=llama_1b_kv DTYPES=bf16 bash ...
# or by side: SIDES=hf-compile BATCHES=1 ..., then SIDES="teexec hf-eager" ...
# (the cache form converted once is reused while WORK lasts).
#
# What teexec does here: the cache stays on the device between steps (one
# block for every layer, presents bound in place); the past is fed at a
# capacity of 64 columns doubled as needed, so a 128+128 run brings two
# shapes (prefill, decode), each a CUDA executor made once and replayed
# (`teexec generate --profile` prints what one cost to set up); the
# exported attention (Concat with the past, mask from attention_mask) is
# lowered to DotProductAttention, whose few-row decode kernel reads the
# cache once per step. AUTOTUNE=0 (default) passes TEEXEC_GEMM_AUTOTUNE=0,
# so those few new shapes are not timed GEMM by GEMM.
set -u
OUT=${OUT:?}
C=${CARRY_DIR:-.carry/lead}
WORK=${WORK:-/tmp/gen-bench}
if [ -f .carry/lead.tar.xz ] && [ ! -d .carry/lead ]; then
  python3 -c "import tarfile; tarfile.open('.carry/lead.tar.xz').extractall('.carry')"
fi
export LD_LIBRARY_PATH=$PWD/$C:$PWD/$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
export TEEXEC_GEMM_AUTOTUNE=${AUTOTUNE:-0}
mkdir -p "$OUT" "$WORK"
only=()
[ -n "${ONLY:-}" ] && only=(--only $ONLY)
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers, onnx; print("torch", torch.__version__, "transformers", transformers.__version__, "onnx", onnx.__version__)'
  "$C/teexec" --version
  stage=${STAGE:-all}
  if [ "$stage" != bench ]; then
    echo "== export"
    python3 bench/gpu/make_kv_models.py --bench-models "$WORK" "${only[@]}" 2>&1 | grep -v -i warning
    cat "$WORK/index.json" 2>/dev/null
  fi
  if [ "$stage" != export ]; then
    echo "== bench"
    args=(--teexec "$C/teexec" --models "$WORK" --out "$OUT" --batches ${BATCHES:-1 16}
          --dtypes ${DTYPES:-fp32 bf16} --prompt "${PROMPT:-128}" --new "${NEW:-128}"
          --iters "${ITERS:-3}" "${only[@]}")
    [ -n "${NO_COMPILE:-}" ] && args+=(--no-compile)
    [ -n "${SIDES:-}" ] && args+=(--sides $SIDES)
    [ -n "${COMPILE_MODES:-}" ] && args+=(--compile-modes $COMPILE_MODES)
    python3 bench/gpu/generate_bench.py "${args[@]}" 2>&1 | grep -v -i warning
  fi
  date -u
} > "$OUT/generate_bench_${STAGE:-all}.log" 2>&1
tail -n 60 "$OUT/generate_bench_${STAGE:-all}.log"
