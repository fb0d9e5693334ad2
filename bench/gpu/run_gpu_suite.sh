#!/bin/bash
# The GPU test suite on the lent GPU machine, from test programs built on the
# development machine (-Dstatic_protobuf=true -Dbuildtype=release
# -Dtests=enabled) and carried with libcmocka in $CARRY_DIR. Runs every
# test_gpu_* program found there, four at a time (their CPU references
# dominate), each under a timeout, and prints one summary line per program
# (exit status, seconds, cmocka's PASSED/FAILED counts) plus every failing
# test. Full logs: $OUT/suite.log. Record the summary in bench/results/.
#
#   CARRY_DIR=.carry/lead OUT=/tmp/suite bash bench/gpu/run_gpu_suite.sh [PROGRAM...]
set -u
C=${CARRY_DIR:-.carry/lead}
OUT=${OUT:-/tmp/gpu-suite}
TIMEOUT=${SUITE_TIMEOUT:-300}
mkdir -p "$OUT/suite"
export LD_LIBRARY_PATH=$PWD/$C:$PWD/$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TEEXEC_GPU_RESULTS_DIR=$OUT/suite
export TEEXEC_SOURCE_ROOT=${TEEXEC_SOURCE_ROOT:-$PWD}
if [ $# -gt 0 ]; then progs=("$@"); else
  progs=(); for p in "$C"/test_gpu_*; do [ -x "$p" ] && progs+=("$(basename "$p")"); done
fi
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run_one() {
  local t=$1 start rc
  start=$(date +%s)
  timeout "$TIMEOUT" "$C/$t" > "$OUT/suite/$t.log" 2>&1
  rc=$?
  echo "$t rc=$rc $(( $(date +%s) - start ))s $(grep -hE '^\[  (PASSED|FAILED)  \]' "$OUT/suite/$t.log" | tr -s ' ' | tr '\n' ' ')"
}
i=0
for t in "${progs[@]}"; do
  run_one "$t" > "$OUT/suite/$t.sum" &
  i=$((i + 1))
  [ $((i % 4)) = 0 ] && wait
done
wait
cat "$OUT"/suite/*.sum
cat "$OUT"/suite/*.log > "$OUT/suite.log"
grep -hE '^\[  FAILED  \]|^\[  ERROR   \]' "$OUT"/suite/*.log | head -40
rm -f "$OUT"/suite/*.sum "$OUT"/suite/*.log
