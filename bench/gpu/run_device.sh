#!/bin/bash
# Runs on the lent GPU machine (device tool): the GPU test programs and the
# quantizer bandwidth benchmark, from binaries built on the development
# machine (-Dstatic_protobuf=true -Dbuildtype=release -Dtests=enabled) and
# carried with libcmocka in $CARRY_DIR (default .carry/gpu; its lib/ holds
# libcmocka). Arguments go to quant_bandwidth. Logs go to $OUT.
set -u
C=${CARRY_DIR:-.carry/gpu}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TEEXEC_GPU_RESULTS_DIR=$OUT
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
} > "$OUT/device.txt" 2>&1
# bandwidth first, on an idle GPU
timeout 120 $C/quant_bandwidth "$@" > "$OUT/bench.txt" 2>&1
echo "quant_bandwidth rc=$?" >> "$OUT/summary.txt"
# the test programs in parallel (their CPU reference dominates)
for t in test_gpu_fp8 test_gpu_mxfp8 test_gpu_block test_gpu_nvfp4; do
  ( start=$(date +%s); timeout 400 $C/$t > "$OUT/$t.log" 2>&1; rc=$?
    echo "$t rc=$rc $(( $(date +%s) - start ))s" >> "$OUT/summary.txt" ) &
done
wait
cat "$OUT"/test_gpu_*.log > "$OUT/tests.log"; rm -f "$OUT"/test_gpu_*.log
cat "$OUT/device.txt" "$OUT/summary.txt"
grep -E 'FAIL|differ|PASSED|FAILED' "$OUT/tests.log" | grep -v '0 differences' | head -60
cat "$OUT/bench.txt"
