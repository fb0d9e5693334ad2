#!/bin/bash
# The MLP-block benchmark of issue 7 (a) and (c), on the GPU machine, in one
# run: PyTorch eager and torch.compile (bench/gpu/torch_mlp.py, which also
# writes the same model with the same weights as ONNX), teexec on that ONNX
# file through the public API (`teexec bench`, bf16 on the CUDA backend),
# the numeric check of the CUDA chain executor against float32 PyTorch
# (mlp_bench --check) and cuBLASLt's own GEMM rate (gemm_rate), then the
# ratios. Binaries come from CARRY_DIR (built on the development machine:
# -Dstatic_protobuf=true -Dbuildtype=release). Without a carried teexec the
# timings come from mlp_bench, as before `teexec bench` existed.
#
# What is timed: torch's train_step is forward + backward with a fixed
# output grad (no loss, no optimizer); `teexec bench --train` is a whole
# step (forward, MSE loss, backward, AdamW update), so its ratio to torch's
# train_step is conservative. Inference is one forward on both sides.
set -u
C=${CARRY_DIR:-.carry/lead}
OUT=${OUT:-/tmp/mlp-bench}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$C:$PWD/$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
H=${HIDDEN:-4096}; F=${FFN:-16384}; T=${TOKENS:-8192}; ITERS=${ITERS:-30}

# teexec bench LABEL TOKENS MODEL [args]: one line "teexec bench LABEL ms=...
# min=... tflops=..." (FLOPs: 4*T*H*F per forward, 3x that per training step).
tb() {
  local label=$1 tokens=$2 model=$3
  shift 3
  if timeout 300 "$C/teexec" bench "$model" --device cuda --dtype bf16 --json "$@" \
      > "$OUT/tb.json" 2> "$OUT/tb.err"; then
    python3 -c "import json,sys
d=json.load(open(sys.argv[1])); fl=4.0*int(sys.argv[2])*int(sys.argv[3])*int(sys.argv[4])
fl*=3 if d['mode']=='train' else 1
print('teexec bench %s ms=%.4f min=%.4f tflops=%.1f' % (sys.argv[5], d['median_ms'], d['min_ms'], fl/(d['median_ms']*1e-3)/1e12))" \
      "$OUT/tb.json" "$tokens" "$H" "$F" "$label"
  else
    echo "teexec bench $label: failed: $(tail -1 "$OUT/tb.err")"
  fi
  rm -f "$OUT/tb.json" "$OUT/tb.err"
}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  echo "MLP block hidden=$H ffn=$F tokens=$T iters=$ITERS"
  python3 bench/gpu/torch_mlp.py --hidden $H --ffn $F --tokens $T --iters $ITERS --onnx "$OUT/mlp.onnx" --check-dir "$OUT" 2>&1 | grep -v Warning
  if [ -x "$C/teexec" ]; then
    # numbers first (teexec bench has no reference to compare with)
    if [ -x "$C/mlp_bench" ]; then
      for r in none fp8-current; do
        $C/mlp_bench "$OUT/mlp.onnx" --rows $T --recipe $r --iters 3 --check "$OUT/x.npy" "$OUT/y.npy" 2>&1 | grep -E 'check|mlp_bench'
      done
    fi
    for r in none fp8-current; do
      tb "train_step recipe=$r" $T "$OUT/mlp.onnx" --train --recipe $r --iters $ITERS
    done
    tb "train_step recipe=none no-graphs" $T "$OUT/mlp.onnx" --train --iters $ITERS --no-graphs
    tb "inference recipe=none" $T "$OUT/mlp.onnx" --iters $ITERS
  else
    for r in none fp8-current; do
      $C/mlp_bench "$OUT/mlp.onnx" --rows $T --recipe $r --iters $ITERS --check "$OUT/x.npy" "$OUT/y.npy" 2>&1
    done
    $C/mlp_bench "$OUT/mlp.onnx" --rows $T --recipe none --iters $ITERS --graph 2>&1
  fi
  echo "latency: tokens=16"
  python3 bench/gpu/torch_mlp.py --hidden $H --ffn $F --tokens 16 --iters 200 --infer-only --onnx "$OUT/mlp16.onnx" 2>&1 | grep -v Warning
  if [ -x "$C/teexec" ]; then
    tb "inference tokens=16" 16 "$OUT/mlp16.onnx" --iters 200 --warmup 10
    tb "inference tokens=16 no-graphs" 16 "$OUT/mlp16.onnx" --iters 200 --warmup 10 --no-graphs
  else
    $C/mlp_bench "$OUT/mlp16.onnx" --rows 16 --recipe none --iters 200 --infer-only 2>&1
    $C/mlp_bench "$OUT/mlp16.onnx" --rows 16 --recipe none --iters 200 --infer-only --graph 2>&1
  fi
  [ -x $C/gemm_rate ] && timeout 120 $C/gemm_rate 2>&1 | tail -12
} | tee "$OUT/mlp_bench.txt"
rm -f "$OUT"/*.onnx "$OUT"/*.npy
