#!/bin/bash
# GPT-2 124M (nanoGPT layout) on the GPU machine, in one run (issues 14, 15):
#  1. bench/gpu/torch_gpt2_124m.py exports it with both exporters, writes a
#     learnable token stream, and trains the same weights in PyTorch (bf16
#     autocast, fused AdamW; eager for the loss curve, torch.compile for
#     speed);
#  2. `teexec plan --explain` and `teexec convert` of both exports: every
#     attention block must be lowered;
#  3. `teexec train --device cuda --dtype bf16 --data tokens.npy --seq T`
#     on both exports (recipe none) and on the dynamo one under fp8-current;
#  4. the table: tokens/s against PyTorch eager and torch.compile, and the
#     largest relative loss difference at every 10th step.
# Binaries come from CARRY_DIR (bench/gpu/pack_carry.sh). The models stay in
# WORK (500 MB each); OUT gets the logs and JSON.
#
#   CARRY_DIR=.carry/lead OUT=/tmp/o bash bench/gpu/run_gpt2_124m.sh
#   env: BATCH SEQ STEPS (8 1024 200), RECIPES ("none fp8-current"), WORK,
#        WARMUP BETA2 CLIP (20 0.95 1.0: nanoGPT's linear warmup, betas
#        0.9/0.95 and gradient clipping, passed to both sides; WARMUP=0
#        BETA2=0.999 CLIP=0 is the constant schedule of earlier runs),
#        FP32_REF=1 (also PyTorch and teexec without bf16: PyTorch's own
#        bf16-vs-fp32 spread, and teexec fp32 held to PyTorch fp32),
#        PROFILE=1 (teexec's per-kernel profile of 20 bf16 steps),
#        REPEAT_REF=1 (PyTorch's eager bf16 run twice: its own spread),
#        NO_COMPILE=1 (skip the torch.compile timing: curves only)
set -u
C=${CARRY_DIR:-.carry/lead}
OUT=${OUT:-/tmp/gpt2-124m}
WORK=${WORK:-/tmp/gpt2-124m-work}
B=${BATCH:-8}; T=${SEQ:-1024}; S=${STEPS:-200}; RECIPES=${RECIPES:-none fp8-current}
W=${WARMUP:-20}; B2=${BETA2:-0.95}; CL=${CLIP:-1.0}
# the same optimizer and schedule on both sides
SCHED_TORCH="--warmup-steps $W --beta2 $B2 --clip-grad-norm $CL"
SCHED_TEEXEC="--lr 6e-4 --warmup-steps $W --beta2 $B2 --clip-grad-norm $CL"
mkdir -p "$OUT" "$WORK"
export LD_LIBRARY_PATH=$PWD/$C:$PWD/$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
X="$C/teexec"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "GPT-2 124M batch=$B seq=$T steps=$S warmup=$W beta2=$B2 clip=$CL"
  python3 bench/gpu/torch_gpt2_124m.py --out "$WORK" --batch "$B" --seq "$T" --steps "$S" $SCHED_TORCH \
      ${FP32_REF:+--fp32-ref} ${REPEAT_REF:+--repeat-ref} ${NO_COMPILE:+--no-compile} 2>&1 |
    grep -v -i warning
  for e in dynamo torchscript; do
    m="$WORK/gpt2_124m_$e/model.onnx"
    [ -f "$m" ] || { echo "$e: no export"; continue; }
    timeout 300 "$X" plan "$m" --train --explain > "$OUT/plan_$e.txt" 2>&1
    echo "plan $e: rc=$? attention lowered $(grep -c '^  lowered  DotProductAttention' "$OUT/plan_$e.txt"), declined $(grep -c '^  declined DotProductAttention' "$OUT/plan_$e.txt"); $(grep '^coverage' "$OUT/plan_$e.txt")"
    timeout 300 "$X" convert "$m" "$WORK/converted_$e.onnx" 2>&1 | tail -n 1
  done
  for e in dynamo torchscript; do
    m="$WORK/gpt2_124m_$e/model.onnx"
    [ -f "$m" ] || continue
    for r in $RECIPES; do
      [ "$e" = torchscript ] && [ "$r" != none ] && continue
      f="$WORK/teexec_${e}_${r//[:,=]/_}.json"  # recipe options make no file names
      timeout 400 "$X" train "$m" --device cuda --dtype bf16 --recipe "$r" --data "$WORK/tokens.npy" \
        --seq "$T" --batch "$B" --steps "$S" $SCHED_TEEXEC --json > "$f" 2> "$f.err"
      rc=$?
      echo "teexec train $e $r: rc=$rc $(tail -n 2 "$f.err" | tr '\n' ' ')"
      [ $rc = 0 ] || rm -f "$f"
      rm -f "$f.err"
    done
  done
  m="$WORK/gpt2_124m_dynamo/model.onnx"
  if [ -n "${FP32_REF:-}" ] && [ -f "$m" ]; then
    f="$WORK/teexec_dynamo_fp32.json"
    timeout 400 "$X" train "$m" --device cuda --dtype fp32 --data "$WORK/tokens.npy" \
      --seq "$T" --batch "$B" --steps "$S" $SCHED_TEEXEC --json > "$f" 2> "$f.err"
    rc=$?
    echo "teexec train dynamo fp32: rc=$rc $(tail -n 2 "$f.err" | tr '\n' ' ')"
    [ $rc = 0 ] || rm -f "$f"
    rm -f "$f.err"
  fi
  if [ -n "${PROFILE:-}" ] && [ -f "$m" ]; then
    timeout 200 "$X" train "$m" --device cuda --dtype bf16 --data "$WORK/tokens.npy" \
      --seq "$T" --batch "$B" --steps 20 $SCHED_TEEXEC --profile > "$OUT/profile_dynamo_bf16.txt" 2>&1
    echo "teexec profile dynamo bf16: rc=$? ($OUT/profile_dynamo_bf16.txt)"
  fi
  echo
  python3 bench/gpu/torch_gpt2_124m.py --compare "$WORK"
  cp "$WORK"/torch.json "$WORK"/torch_losses*.npy "$OUT/" 2>/dev/null
  cp "$WORK"/teexec_*.json "$OUT/" 2>/dev/null
} 2>&1 | tee "$OUT/gpt2_124m.log"
