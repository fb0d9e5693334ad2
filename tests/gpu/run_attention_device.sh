#!/bin/bash
# Runs tests/gpu/test_gpu_attention on the lent GPU machine (device tool):
# the binary (built here with -Dstatic_protobuf=true -Dbuildtype=release
# -Dtests=enabled) and libcmocka (in lib/) are carried in $CARRY_DIR
# (default .carry/sdpa). Finds the system cuDNN (else the PyTorch one, or
# USE_TORCH_CUDNN=1 to prefer it). An argument is a cmocka test filter.
# Logs and gpu_results.txt go to $OUT.
set -u
C=${CARRY_DIR:-.carry/sdpa}
OUT=${OUT:-/tmp/sdpa-out}
mkdir -p "$OUT"
CUDNN_DIR=""
for d in /usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib64; do
  if ls $d/libcudnn.so.9* >/dev/null 2>&1; then CUDNN_DIR=$d; break; fi
done
if [ -z "$CUDNN_DIR" ] || [ -n "${USE_TORCH_CUDNN:-}" ]; then
  CUDNN_DIR=$(python3 -c "import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__) + '/lib')" 2>/dev/null)
fi
[ -z "$CUDNN_DIR" ] && CUDNN_DIR=$(dirname "$(find / -name 'libcudnn.so.9*' 2>/dev/null | head -1)")
echo "cudnn dir: $CUDNN_DIR" > "$OUT/env.txt"
ls -la $CUDNN_DIR/libcudnn*.so.9* >> "$OUT/env.txt" 2>&1
export LD_LIBRARY_PATH=$PWD/$C/lib:$CUDNN_DIR:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TEEXEC_GPU_RESULTS_DIR=$OUT
ldd $C/test_gpu_attention | grep -E "cudnn|cublas|cmocka|not found" >> "$OUT/env.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv >> "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout ${T:-150} $C/test_gpu_attention "$@" > "$OUT/test.log" 2>&1
echo "rc=$?" | tee -a "$OUT/test.log"
grep -E "cuDNN|TIMING|refused|PASSED|FAILED|OK|SKIP|ERROR|error|element|outside|Fail" "$OUT/test.log" | head -80
