#!/bin/bash
# GEMM algorithm selection on the GPU machine, in one run (docs/gemm-autotune.md):
#  1. the GPU tests that exercise the GEMM layer (test_gpu_gemm_tune with its
#     per-GEMM timing table, test_gpu_linear_gemm, test_gpu_te_linear,
#     test_gpu_models), four at a time;
#  2. the MLP block (h=4096, ffn=16384) at 16 tokens: PyTorch eager inference
#     (bench/gpu/torch_mlp.py, which writes the same model as ONNX) against
#     `teexec bench --dtype bf16` with TEEXEC_GEMM_AUTOTUNE=0 and =1, twice
#     each, alternating; one --profile run; teexec's output against the
#     float32 PyTorch module (relative L2) with either setting;
#  3. the same block at 8192 tokens: inference and training step, PyTorch
#     eager against teexec with TEEXEC_GEMM_AUTOTUNE=0 and =1;
#  4. the ratios.
# Binaries (built on the development machine with -Dstatic_protobuf=true
# -Dbuildtype=release -Dtests=enabled) and libcmocka come from CARRY_DIR.
#
#   CARRY_DIR=.carry/gemmsel OUT=/tmp/gemmsel bash bench/gpu/run_gemm_select.sh
set -u
C=${CARRY_DIR:-.carry/gemmsel}
OUT=${OUT:-/tmp/gemm-select}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$C:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TEEXEC_SOURCE_ROOT=$PWD
export TEEXEC_GPU_RESULTS_DIR=$OUT
H=4096; F=16384

# tb LABEL TOKENS MODEL [args]: "teexec LABEL ms=<median> min=<min> tflops=<x>"
tb() {
  local label=$1 tokens=$2 model=$3
  shift 3
  if timeout 120 "$C/teexec" bench "$model" --device cuda --dtype bf16 --json "$@" \
      > "$OUT/tb.json" 2> "$OUT/tb.err"; then
    python3 -c "import json,sys
d=json.load(open(sys.argv[1])); fl=4.0*int(sys.argv[2])*int(sys.argv[3])*int(sys.argv[4])
fl*=3 if d['mode']=='train' else 1
print('teexec %s ms=%.4f min=%.4f tflops=%.1f' % (sys.argv[5], d['median_ms'], d['min_ms'], fl/(d['median_ms']*1e-3)/1e12))" \
      "$OUT/tb.json" "$tokens" "$H" "$F" "$label"
  else
    echo "teexec $label: failed: $(tail -3 "$OUT/tb.err" | tr '\n' ' ')"
  fi
  rm -f "$OUT/tb.json"
}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  echo "== tests"
  for t in test_gpu_gemm_tune test_gpu_linear_gemm test_gpu_te_linear test_gpu_models; do
    ( s=$(date +%s); timeout 100 "$C/$t" > "$OUT/$t.log" 2>&1; rc=$?
      echo "$t rc=$rc $(( $(date +%s) - s ))s $(grep -hE '^\[  (PASSED|FAILED)  \]' "$OUT/$t.log" | tr -s ' ' | tr '\n' ' ')" ) &
  done
  wait
  grep -hE '^\[  FAILED  \]|^\[  ERROR   \]' "$OUT"/test_*.log | head -20
  grep -hE '^tune |^T16|^T8192|^GEMM|^MLP block' "$OUT/test_gpu_gemm_tune.log"

  echo "== latency: tokens=16"
  timeout 100 python3 bench/gpu/torch_mlp.py --hidden $H --ffn $F --tokens 16 --iters 300 \
      --infer-only --no-compile --onnx "$OUT/mlp16.onnx" --check-dir "$OUT" 2>&1 | grep -v Warning
  # numbers: teexec's bf16 output (its first call, which tunes) against float32 PyTorch
  for a in 0 1; do
    rm -rf "$OUT/y_teexec"
    if TEEXEC_GEMM_AUTOTUNE=$a timeout 60 "$C/teexec" run "$OUT/mlp16.onnx" --device cuda --dtype bf16 \
        --input "x=$OUT/x.npy" --output-dir "$OUT/y_teexec" > /dev/null 2> "$OUT/run.err"; then
      y=$(ls "$OUT"/y_teexec/*.npy | head -1)
      echo "check tokens=16 autotune=$a vs float32 PyTorch: $(python3 bench/gpu/torch_mlp.py --compare "$OUT/y.npy" "$y")"
    else
      echo "check tokens=16 autotune=$a: teexec run failed: $(tail -1 "$OUT/run.err")"
    fi
  done
  rm -rf "$OUT/y_teexec" "$OUT/run.err" "$OUT/x.npy" "$OUT/y.npy"
  for rep in 1 2; do
    for a in 0 1; do
      TEEXEC_GEMM_AUTOTUNE=$a tb "inference tokens=16 autotune=$a" 16 "$OUT/mlp16.onnx" --iters 300 --warmup 10
    done
  done
  TEEXEC_GEMM_AUTOTUNE=1 tb "inference tokens=16 autotune=1 no-graphs" 16 "$OUT/mlp16.onnx" --iters 300 --warmup 10 --no-graphs
  TEEXEC_GEMM_AUTOTUNE=1 timeout 60 "$C/teexec" bench "$OUT/mlp16.onnx" --device cuda --dtype bf16 \
      --iters 100 --warmup 10 --profile > "$OUT/profile16.txt" 2>&1
  grep -E 'ms|kernel' "$OUT/profile16.txt" | head -20
  rm -f "$OUT/mlp16.onnx"

  echo "== throughput: tokens=8192"
  timeout 120 python3 bench/gpu/torch_mlp.py --hidden $H --ffn $F --tokens 8192 --iters 15 \
      --no-compile --onnx "$OUT/mlp.onnx" 2>&1 | grep -v Warning
  for a in 0 1; do
    TEEXEC_GEMM_AUTOTUNE=$a tb "inference tokens=8192 autotune=$a" 8192 "$OUT/mlp.onnx" --iters 15
    TEEXEC_GEMM_AUTOTUNE=$a tb "train_step tokens=8192 autotune=$a" 8192 "$OUT/mlp.onnx" --train --iters 15
  done
  rm -f "$OUT/mlp.onnx"
  date -u
} 2>&1 | tee "$OUT/gemm_select.txt"

python3 - "$OUT/gemm_select.txt" <<'PYEOF'
import re, sys
text = open(sys.argv[1]).read()
small, _, big = text.partition("== throughput")
def ms(part, pattern):
    v = [float(x) for x in re.findall(re.escape(pattern) + r" ms=([0-9.]+)", part)]
    return min(v) if v else None
def ratio(label, num, den, goal):
    if num and den:
        print("ratio %-52s %.3fx (goal %s)" % (label, num / den, goal))
e16 = ms(small, "torch eager inference")
for a in ("0", "1"):
    ratio("16 tokens, autotune=%s, CUDA graph vs torch eager" % a, e16,
          ms(small, "inference tokens=16 autotune=%s" % a), ">= 1.3x")
ie, te = ms(big, "torch eager inference"), ms(big, "torch eager train_step")
for a in ("0", "1"):
    ratio("8192 tokens inference, autotune=%s vs torch eager" % a, ie,
          ms(big, "inference tokens=8192 autotune=%s" % a), ">= 1.1x")
    ratio("8192 tokens training step, autotune=%s vs torch eager" % a, te,
          ms(big, "train_step tokens=8192 autotune=%s" % a), ">= 1.1x")
PYEOF
