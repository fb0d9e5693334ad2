#!/bin/bash
# The MXFP8 / NVFP4 emulation measurements (bench/results/
# gpu_emulation_2026-11-30.md) in one call on the GPU machine: the tests that
# cover the emulation (four at a time, bench/gpu/run_gpu_suite.sh), while
# PyTorch writes the MLP block as ONNX and times its eager step; then
# emu_bench (quantize / dequantize / GEMM per layout, former vs current
# path); then `teexec bench --train --profile` on the MLP block per recipe,
# as long as the time budget lasts. Binaries: $CARRY (a folder, or the
# .tar.xz of one, built with -Dstatic_protobuf=true -Dbuildtype=release).
#
#   OUT=/tmp/emu CARRY=.carry/emu.tar.xz bash bench/gpu/run_emu_device.sh
set -u
OUT=${OUT:-/tmp/emu}
CARRY=${CARRY:-.carry/emu.tar.xz}
BUDGET=${BUDGET:-140}
mkdir -p "$OUT"
case "$CARRY" in
*.tar.xz)
  python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall('.carry')" "$CARRY"
  C=.carry/$(basename "$CARRY" .tar.xz) ;;
*) C=$CARRY ;;
esac
export LD_LIBRARY_PATH=$PWD/$C:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
left() { echo $((BUDGET - SECONDS)); }

(timeout 70 python3 bench/gpu/torch_mlp.py --tokens 8192 --iters 10 --no-compile \
   --onnx /tmp/emu_mlp.onnx 2>&1 | grep -v Warning > "$OUT/torch_mlp.txt") &
torch_pid=$!
CARRY_DIR=$C OUT=$OUT SUITE_TIMEOUT=60 TEEXEC_SOURCE_ROOT=$PWD bash bench/gpu/run_gpu_suite.sh \
  > "$OUT/suite_summary.txt" 2>&1
echo "tests done at ${SECONDS}s"
wait $torch_pid
cat "$OUT/torch_mlp.txt"
echo "torch done at ${SECONDS}s"

timeout $(( $(left) > 50 ? 50 : $(left) )) "$C/emu_bench" --reps 10 > "$OUT/emu_bench.txt" 2>&1
echo "emu_bench rc=$? at ${SECONDS}s"

for r in mxfp8 none nvfp4; do
  t=$(left)
  [ "$t" -lt 12 ] && { echo "no time left for recipe $r"; break; }
  [ "$t" -gt 30 ] && t=30
  timeout "$t" "$C/teexec" bench /tmp/emu_mlp.onnx --device cuda --dtype bf16 --train \
    --recipe $r --profile --iters 10 > "$OUT/teexec_bench_$r.txt" 2>&1
  echo "teexec bench $r rc=$? at ${SECONDS}s"
done
