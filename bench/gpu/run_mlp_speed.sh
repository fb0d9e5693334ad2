#!/bin/bash
# The MLP training step's speed study (issue 7 (a)), on the GPU machine, in
# one call: PyTorch eager (bench/gpu/torch_mlp.py, which also writes the
# model as ONNX) and teexec's training step (`teexec bench --train`) under
# the GEMM tuning / optimizer settings in SETTINGS, side by side; then the
# GEMM study (gemm_study: cuBLASLt's answers per GEMM, the step's GEMM
# sequence per tuning setting) and PyTorch's matmuls at the same shapes
# (torch_gemm_shapes.py); then a profile of each recipe. Each part writes
# its log under OUT as it goes, so a cut-off call keeps what finished.
#
# Env: CARRY_DIR (binaries: teexec, gemm_study, test programs), OUT,
# ITERS (default 20), SETTINGS (space-separated "AUTOTUNE/UNROLL" pairs:
# TEEXEC_GEMM_AUTOTUNE and TEEXEC_OPTIM_UNROLL, the latter measured on
# 2026-12-01 and since removed, so UNROLL is ignored now; FP8_SETTINGS for the other
# recipes, default SETTINGS), RECIPES, END_TORCH=1 (PyTorch again after the
# A/B), TORCH_GEMM=0 (skip torch_gemm_shapes.py), PAR_TESTS (below), TESTS (test
# programs to run first), STUDY=0 to skip the GEMM study, PROFILE=0 to skip
# the profiles.
set -u
C=${CARRY_DIR:-.carry/mlpspeed}
OUT=${OUT:-/tmp/mlp-speed}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$C:$PWD/$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TEEXEC_SOURCE_ROOT=$PWD TEEXEC_GPU_RESULTS_DIR=$OUT/records
mkdir -p "$OUT/records"
H=${HIDDEN:-4096}; F=${FFN:-16384}; T=${TOKENS:-8192}; ITERS=${ITERS:-20}
SETTINGS=${SETTINGS:-"8/1 8x3/1"}
RECIPES=${RECIPES:-"none fp8-current"}

# tb LABEL [args]: one line "teexec bench LABEL ms=... min=... tflops=..."
tb() {
  local label=$1
  shift
  if timeout 60 "$C/teexec" bench "$OUT/mlp.onnx" --device cuda --dtype bf16 --json "$@" \
      > "$OUT/tb.json" 2> "$OUT/tb.err"; then
    python3 -c "import json,sys
d=json.load(open(sys.argv[1])); fl=4.0*int(sys.argv[2])*int(sys.argv[3])*int(sys.argv[4])
fl*=3 if d['mode']=='train' else 1
print('teexec bench %s ms=%.4f min=%.4f tflops=%.1f' % (sys.argv[5], d['median_ms'], d['min_ms'], fl/(d['median_ms']*1e-3)/1e12))" \
      "$OUT/tb.json" "$T" "$H" "$F" "$label"
  else
    echo "teexec bench $label: failed: $(tail -1 "$OUT/tb.err")"
  fi
}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
  for t in ${TESTS:-}; do
    timeout 90 "$C/$t" > "$OUT/$t.log" 2>&1
    echo "test $t: exit $? ($(grep -c '\[       OK \]' "$OUT/$t.log") OK, $(grep -c '\[  FAILED  \]' "$OUT/$t.log") FAILED lines)"
  done
  timeout 90 python3 bench/gpu/torch_mlp.py --hidden $H --ffn $F --tokens $T --iters $ITERS \
    --no-compile --autocast --onnx "$OUT/mlp.onnx" 2>&1 | grep -v Warning
  for r in $RECIPES; do
    S=$SETTINGS
    [ "$r" != none ] && S=${FP8_SETTINGS:-$SETTINGS}
    for s in $S; do
      TEEXEC_GEMM_AUTOTUNE=${s%/*} TEEXEC_OPTIM_UNROLL=${s#*/} \
        tb "train_step recipe=$r tune=${s%/*} unroll=${s#*/}" --train --recipe $r --iters $ITERS
    done
  done
  # PyTorch once more at the end of the A/B (END_TORCH=1): its eager step drifts
  [ "${END_TORCH:-0}" != 0 ] && timeout 60 python3 bench/gpu/torch_mlp.py --hidden $H --ffn $F \
    --tokens $T --iters $ITERS --no-compile 2>&1 | grep -v Warning | grep train_step
  date -u
} 2>&1 | tee "$OUT/speed.txt"

# PAR_TESTS: test programs run after the A/B, side by side (their CPU references
# dominate), each under PAR_TIMEOUT seconds; "PROG@VAR=VALUE" runs PROG with
# that variable set (e.g. test_gpu_optim@TEEXEC_OPTIM_UNROLL=1).
if [ -n "${PAR_TESTS:-}" ]; then
  for spec in $PAR_TESTS; do
    t=${spec%%@*}; v=""; [ "$t" != "$spec" ] && v=${spec#*@}
    log="$OUT/$(echo "$spec" | tr '@=' '__').log"
    ( env $v timeout ${PAR_TIMEOUT:-60} "$C/$t" > "$log" 2>&1
      echo "test $spec: exit $? ($(grep -c '\[       OK \]' "$log") OK, $(grep -c '\[  FAILED  \]' "$log") FAILED lines)" ) &
  done
  wait
  grep -h "FAILED\|PASSED" "$OUT"/test_*.log | sort | uniq -c | head -40
fi

if [ "${STUDY:-1}" != 0 ]; then
  timeout 70 "$C/gemm_study" --tokens $T --hidden $H --ffn $F ${STUDY_ARGS:---tune 8x3 --tune 32x3} \
    > "$OUT/gemm_study.txt" 2>&1
  echo "gemm_study: exit $?" | tee -a "$OUT/speed.txt"
  grep "^sequence\|^sweep" "$OUT/gemm_study.txt"
  [ "${TORCH_GEMM:-1}" != 0 ] && timeout 40 python3 bench/gpu/torch_gemm_shapes.py --tokens $T \
    --hidden $H --ffn $F 2>&1 | grep -v Warning | tee "$OUT/torch_gemm.txt"
fi


if [ "${PROFILE:-1}" != 0 ]; then
  for r in $RECIPES; do
    s=${SETTINGS##* }
    TEEXEC_GEMM_AUTOTUNE=${s%/*} TEEXEC_OPTIM_UNROLL=${s#*/} timeout 60 "$C/teexec" bench \
      "$OUT/mlp.onnx" --device cuda --dtype bf16 --train --recipe $r --iters 5 --profile \
      > "$OUT/profile_$r.txt" 2>&1
    echo "profile $r: exit $?"
  done
fi
rm -f "$OUT"/*.onnx "$OUT"/*.npy "$OUT"/tb.json
