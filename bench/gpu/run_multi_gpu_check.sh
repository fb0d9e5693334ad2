#!/bin/bash
# Issue 20's GPU checks in one command, for a machine with NVIDIA GPUs (one
# for the single-rank NCCL path, two for the rest). Never run yet: written on
# a machine without a GPU (docs/multi-gpu.md, "What was tested where").
#   1. builds teexec with CUDA into BUILD_DIR (release, tests on) unless
#      CARRY_DIR holds a build made elsewhere (bench/gpu/pack_carry.sh);
#   2. the NCCL GPU tests: test_gpu_nccl (one GPU: a world of one through
#      NCCL) and test_gpu_nccl_multi (two GPUs: threads, processes through a
#      rendezvous file, abort, timeouts; exits 77 with the reason below two);
#   3. the CPU data parallel and tensor parallel tests on the same build;
#   4. the zoo's GPT-2 with `teexec train --gpus 2` and with one process per
#      GPU (global batch 4: 2 rows per rank, the export's batch), and one GPU
#      for scale: the loss curves (--json) in $OUT/train.log.
#   OUT=/tmp/mgpu bash bench/gpu/run_multi_gpu_check.sh
# env: BUILD_DIR (build-mgpu), CARRY_DIR, OUT (/tmp/teexec-mgpu).
set -u
OUT=${OUT:-/tmp/teexec-mgpu}
BUILD_DIR=${BUILD_DIR:-build-mgpu}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
cd "$root"
B=${CARRY_DIR:-$BUILD_DIR}
if [ -z "${CARRY_DIR:-}" ]; then
    [ -d "$BUILD_DIR" ] || meson setup "$BUILD_DIR" -Dcuda=enabled -Dtests=enabled \
        --buildtype=release > "$OUT/setup.log" 2>&1 || { cat "$OUT/setup.log"; exit 1; }
    ninja -C "$BUILD_DIR" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
nvidia-smi -L 2>&1 | tee "$OUT/gpus.txt"
status=0
meson test -C "$B" --no-rebuild --print-errorlogs test_gpu_nccl test_gpu_nccl_multi \
    test_comm test_train_dp test_train_dp_cli test_tp_collectives 2>&1 | tee "$OUT/tests.log" ||
    status=1
M=models/zoo/gpt2_dynamo
T=(train "$M/model.onnx" --data "$M/train.npz" --loss cross-entropy --steps 20 --json)
# the zoo exports bake batch 2 into their Reshapes, so one GPU cannot run the
# global batch of 4: its curve (2 rows a step) is for scale only; the exact
# one-vs-two comparison is test_gpu_nccl_multi's (models/mlp)
echo "== one GPU, --batch 2 (for scale)" | tee "$OUT/train.log"
"$B/tools/teexec" "${T[@]}" --batch 2 --device cuda >> "$OUT/train.log" 2>&1
echo "exit $?" | tee -a "$OUT/train.log"
echo "== teexec train --gpus 2, global batch 4" | tee -a "$OUT/train.log"
"$B/tools/teexec" "${T[@]}" --batch 4 --gpus 2 >> "$OUT/train.log" 2>&1
echo "exit $?" | tee -a "$OUT/train.log"
echo "== one process per GPU" | tee -a "$OUT/train.log"
rdv="$OUT/rendezvous"
rm -f "$rdv"
for r in 0 1; do
    CUDA_VISIBLE_DEVICES=$r "$B/tools/teexec" "${T[@]}" --batch 4 --world-size 2 --rank $r \
        --rendezvous "$rdv" > "$OUT/rank$r.log" 2>&1 &
done
wait
for r in 0 1; do echo "rank $r:"; cat "$OUT/rank$r.log"; done | tee -a "$OUT/train.log"
echo "results in $OUT"
exit $status
