#!/bin/bash
# The GPT-2 block training benchmark, on the GPU machine, in one run:
# PyTorch eager and torch.compile training steps (bench/gpu/torch_gpt2.py,
# which also writes the same block with the same weights as a te.ops ONNX
# model), `teexec bench --train --device cuda --dtype bf16` on that model,
# and cuBLASLt's bf16 GEMM rate at the block's GEMM shapes (gemm_rate), then
# one table: median ms, TFLOP/s, ratios to eager and compile, share of the
# GEMM rate. Binaries (teexec, libteexec.so, gemm_rate) come from CARRY_DIR,
# built on the development machine with -Dstatic_protobuf=true
# -Dbuildtype=release; a missing one is skipped with a note.
#
#   CARRY_DIR=.carry/x OUT=/tmp/o bash bench/gpu/run_gpt2_bench.sh
#   env: HIDDEN HEADS BATCH SEQ ITERS WARMUP (2048 16 4 2048 20 5),
#        RECIPES ("none"; e.g. "none fp8-current"), GRAPHS_OFF=1 (also time
#        teexec without CUDA graphs), TORCH_ARGS (extra torch_gpt2.py flags,
#        e.g. --pure-bf16 or --no-compile)
set -u
C=${CARRY_DIR:-.carry/lead}
OUT=${OUT:-/tmp/gpt2-bench}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$C:$PWD/$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
H=${HIDDEN:-2048}; NH=${HEADS:-16}; B=${BATCH:-4}; S=${SEQ:-2048}
ITERS=${ITERS:-20}; WARMUP=${WARMUP:-5}; RECIPES=${RECIPES:-none}
PY=bench/gpu/torch_gpt2.py
SHAPE=(--hidden "$H" --heads "$NH" --batch "$B" --seq "$S")
rm -f "$OUT"/teexec_*.json "$OUT/torch.json" "$OUT/gemm_rate.txt"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  echo "GPT-2 block hidden=$H heads=$NH batch=$B seq=$S iters=$ITERS warmup=$WARMUP"
  python3 $PY "${SHAPE[@]}" --iters "$ITERS" --warmup "$WARMUP" --onnx "$OUT/gpt2.onnx" \
    --results "$OUT/torch.json" ${TORCH_ARGS:-} 2>&1 | grep -v Warning
  if [ -x "$C/teexec" ] && [ -f "$OUT/gpt2.onnx" ]; then
    for r in $RECIPES; do
      for g in on ${GRAPHS_OFF:+off}; do
        f="$OUT/teexec_${r}_graphs-$g.json"
        extra=()
        [ "$g" = off ] && extra=(--no-graphs)
        timeout 300 "$C/teexec" bench "$OUT/gpt2.onnx" --train --device cuda --dtype bf16 \
          --recipe "$r" --iters "$ITERS" --warmup "$WARMUP" --json "${extra[@]}" \
          > "$f" 2> "$f.err"
        rc=$?
        echo "teexec bench --recipe $r graphs $g: rc=$rc $(python3 -c "import json,sys
d=json.load(open(sys.argv[1])); print('ms=%.3f min=%.3f loss %.4g -> %.4g' % (d['median_ms'], d['min_ms'], d['loss_first'], d['loss_last']))" "$f" 2>/dev/null)"
        [ $rc = 0 ] || { cat "$f.err"; rm -f "$f"; }
        rm -f "$f.err"
      done
    done
  else
    echo "teexec: not run ($C/teexec or the ONNX model missing)"
  fi
  if [ -x "$C/gemm_rate" ]; then
    # shellcheck disable=SC2046
    timeout 120 "$C/gemm_rate" $(python3 $PY "${SHAPE[@]}" --gemm-shapes) > "$OUT/gemm_rate.txt" 2>&1
    grep -E '^(gemm_rate|bf16)' "$OUT/gemm_rate.txt"
  else
    echo "gemm_rate: not run ($C/gemm_rate missing)"
  fi
  echo
  [ -f "$OUT/torch.json" ] && python3 $PY --summarize "$OUT"
} | tee "$OUT/gpt2_bench.txt"
rm -f "$OUT"/*.onnx
