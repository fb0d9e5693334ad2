#!/bin/bash
# One device call that times the zoo and GPT-2 124M on the GPU against
# PyTorch eager and torch.compile on the same weights (issue 15):
#  1. bench/gpu/zoo_bench.py: every zoo architecture, both exporters,
#     inference at batch 1 and 8 and a training step at batch 8;
#  2. bench/gpu/run_gpt2_124m.sh: GPT-2 124M training tokens/s (bf16 and
#     fp8-current) and its loss curve against PyTorch's (skip with
#     GPT2=0).
# Binaries from CARRY_DIR (bench/gpu/pack_carry.sh; .carry/lead.tar.xz is
# unpacked first where only it was carried). Logs and JSON under OUT.
#
#   device run, carry .carry/lead.tar.xz: bash bench/gpu/run_zoo_bench.sh
#   env: ONLY="gpt2 llama" NO_COMPILE=1 ITERS=50 GPT2=0, and run_gpt2_124m.sh's
set -u
OUT=${OUT:?}
C=${CARRY_DIR:-.carry/lead}
if [ -f .carry/lead.tar.xz ] && [ ! -d .carry/lead ]; then
  python3 -c "import tarfile; tarfile.open('.carry/lead.tar.xz').extractall('.carry')"
fi
export LD_LIBRARY_PATH=$PWD/$C:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
args=(--teexec "$C/teexec" --work "${WORK:-/tmp/zoo-bench}" --out "$OUT" --iters "${ITERS:-50}")
[ -n "${ONLY:-}" ] && args+=(--only $ONLY)
[ -n "${NO_COMPILE:-}" ] && args+=(--no-compile)
{
  date -u
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 bench/gpu/zoo_bench.py "${args[@]}" 2>&1 | grep -v -i warning
} > "$OUT/zoo_bench.log" 2>&1
tail -n 80 "$OUT/zoo_bench.log"
if [ "${GPT2:-1}" != 0 ]; then
  CARRY_DIR=$C OUT=$OUT bash bench/gpu/run_gpt2_124m.sh > /dev/null 2>&1
  tail -n 30 "$OUT/gpt2_124m.log"
fi
