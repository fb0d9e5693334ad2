#!/bin/bash
# The MLP-block benchmark of issue 7 (a) and (c), on the GPU machine, in one
# run: PyTorch eager and torch.compile (bench/gpu/torch_mlp.py, which also
# writes the same model with the same weights as ONNX), teexec's CUDA chain
# executor (mlp_bench) on that ONNX file, and cuBLASLt's own GEMM rate
# (gemm_rate), then the ratios. Binaries come from CARRY_DIR (built on the
# development machine: -Dstatic_protobuf=true -Dbuildtype=release).
set -u
C=${CARRY_DIR:-.carry/lead}
OUT=${OUT:-/tmp/mlp-bench}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$C:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
H=${HIDDEN:-4096}; F=${FFN:-16384}; T=${TOKENS:-8192}; ITERS=${ITERS:-30}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  echo "MLP block hidden=$H ffn=$F tokens=$T iters=$ITERS"
  python3 bench/gpu/torch_mlp.py --hidden $H --ffn $F --tokens $T --iters $ITERS --onnx "$OUT/mlp.onnx" --check-dir "$OUT" 2>&1 | grep -v Warning
  for r in none fp8-current; do
    $C/mlp_bench "$OUT/mlp.onnx" --rows $T --recipe $r --iters $ITERS --check "$OUT/x.npy" "$OUT/y.npy" 2>&1
  done
  $C/mlp_bench "$OUT/mlp.onnx" --rows $T --recipe none --iters $ITERS --graph 2>&1
  echo "latency: tokens=16"
  python3 bench/gpu/torch_mlp.py --hidden $H --ffn $F --tokens 16 --iters 200 --infer-only --onnx "$OUT/mlp16.onnx" 2>&1 | grep -v Warning
  $C/mlp_bench "$OUT/mlp16.onnx" --rows 16 --recipe none --iters 200 --infer-only 2>&1
  $C/mlp_bench "$OUT/mlp16.onnx" --rows 16 --recipe none --iters 200 --infer-only --graph 2>&1
  [ -x $C/gemm_rate ] && timeout 120 $C/gemm_rate 2>&1 | tail -12
} | tee "$OUT/mlp_bench.txt"
rm -f "$OUT"/*.onnx "$OUT"/*.npy
