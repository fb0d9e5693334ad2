#!/bin/bash
# GroupedLinear's GEMMs on the lent GPU machine, from binaries built on the
# development machine and packed into .carry/ggemm.tar.xz (test_gpu_grouped,
# grouped_bench and optional grouped_bench_<variant> builds with other tile
# shapes, libcmocka): the kernel cases first (fast), the benchmarks, then
# the whole test program with the time left. Logs under $OUT.
#   OUT=/tmp/gg bash bench/gpu/run_grouped_device.sh [SECONDS]
set -u
OUT=${OUT:-/tmp/gg}
BUDGET=${1:-110}
mkdir -p "$OUT"
[ -f .carry/ggemm.tar.xz ] && python3 -c "import tarfile; tarfile.open('.carry/ggemm.tar.xz').extractall('.carry')"
C=.carry/ggemm
export LD_LIBRARY_PATH=$PWD/$C:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TEEXEC_SOURCE_ROOT=$PWD TEEXEC_GPU_RESULTS_DIR=$OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
left() { echo $(( BUDGET - SECONDS )); }
TG_GROUPED_FILTER='kernel_*' timeout 30 $C/test_gpu_grouped > "$OUT/test_kernels.log" 2>&1
echo "kernel cases rc=$? ${SECONDS}s"; grep -E '^\[  (PASSED|FAILED)|^\[  ERROR|FAILED  \]' "$OUT/test_kernels.log"
for b in "$C"/grouped_bench*; do
  n=$(basename "$b")
  timeout 14 "$b" > "$OUT/$n.txt" 2>&1
  echo "$n rc=$? ${SECONDS}s"
done
t=$(left)
if [ "$t" -gt 5 ]; then
  timeout "$t" $C/test_gpu_grouped > "$OUT/test_all.log" 2>&1
  echo "test_gpu_grouped rc=$? ${SECONDS}s"
  grep -E '^\[  (PASSED|FAILED)|^\[  ERROR|FAILED  \]|grouped GEMM bf16' "$OUT/test_all.log"
fi
for b in "$C"/grouped_bench*; do echo "== $(basename "$b")"; grep -E '^\|.*(FPROP|DGRAD|WGRAD)|rc=|disagree|grouped_bench:' "$OUT/$(basename "$b").txt" | cut -c1-150; done
