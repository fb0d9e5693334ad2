#!/bin/bash
# Runs the serving tests (shared weights, device-memory limit, device I/O,
# shape buckets) on the lent GPU machine (device tool): the binaries (built
# with -Dstatic_protobuf=true -Dbuildtype=release -Dtests=enabled
# -Dcuda=enabled -Dgpu_archs=sm_90: tests/gpu/test_gpu_shared_weights and
# tests/gpu/test_gpu_device_io) and libcmocka (in lib/) are carried in
# $CARRY_DIR (default .carry/serve). Each runs plainly, then (SANITIZE=1)
# under compute-sanitizer memcheck and racecheck. Logs and
# gpu_results.txt (the byte counts and timings) go to $OUT.
set -u
C=${CARRY_DIR:-.carry/serve}
OUT=${OUT:-/tmp/serve-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TEEXEC_GPU_RESULTS_DIR=$OUT
# the tests run one at a time here: device-wide free memory measures them
export TEEXEC_GPU_EXCLUSIVE=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
status=0
for t in test_gpu_shared_weights test_gpu_device_io; do
  timeout ${T:-300} $C/$t > "$OUT/$t.log" 2>&1
  rc=$?
  echo "$t rc=$rc" | tee -a "$OUT/summary.txt"
  [ $rc -ne 0 ] && status=1
  grep -E "shared weights|device growth|after|shape N=|trainer|refused|copies|timing|buckets|PASSED|FAILED|SKIP" \
    "$OUT/$t.log" | head -60
  if [ -n "${SANITIZE:-}" ]; then
    for tool in memcheck racecheck; do
      timeout ${T:-600} /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 \
        $C/$t > "$OUT/$t.$tool.log" 2>&1
      rc=$?
      echo "$t $tool rc=$rc" | tee -a "$OUT/summary.txt"
      [ $rc -ne 0 ] && status=1
      tail -5 "$OUT/$t.$tool.log"
    done
  fi
done
exit $status
