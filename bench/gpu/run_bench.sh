#!/bin/bash
# Issue 7's benchmark in one command, on a machine with an NVIDIA GPU,
# PyTorch and onnx:
#   1. the binaries (teexec, gemm_rate): taken from CARRY_DIR when it holds
#      them, else built here with Meson (release) into BUILD_DIR;
#   2. (a) and (c), the MLP block h=4096 ffn=16384 at 8192 tokens (inference
#      and training step; bf16, fp8-current, mxfp8) and at 16 tokens
#      (inference latency, CUDA graphs): bench/gpu/run_mlp_bench.sh;
#   3. (b), the GPT-2 block h=2048, 16 heads, batch 4 x seq 2048, training
#      step: bench/gpu/run_gpt2_bench.sh;
#   4. issue 19's quantizer goal: every CUDA quantizer's GB/s against a
#      device-to-device copy in the same process (quant_bandwidth), goal
#      >= 85% of copy;
# each against PyTorch eager and torch.compile timed in the same run on the
# same model with the same weights (the torch_*.py scripts export it), with
# cuBLASLt's own GEMM rate (gemm_rate) measured in the same run. The last
# lines are the goals table. Logs: $OUT/mlp.log, $OUT/gpt2.log.
#
#   OUT=/tmp/bench bash bench/gpu/run_bench.sh            # builds if needed
#   CARRY_DIR=.carry/lead OUT=$OUT bash bench/gpu/run_bench.sh
#
# The lent H200 has no protobuf-c, protoc-c or package manager, so there the
# binaries are built on the development machine and carried:
# bench/gpu/pack_carry.sh makes such a directory.
# env: CARRY_DIR, BUILD_DIR (build-bench), OUT (/tmp/teexec-bench),
#      PAIRS (3: back-to-back PyTorch/teexec rounds of the MLP step),
#      ITERS (30), SKIP_GPT2=1, SKIP_MLP=1, SKIP_QUANT=1.
set -u
OUT=${OUT:-/tmp/teexec-bench}
BUILD_DIR=${BUILD_DIR:-build-bench}
mkdir -p "$OUT"

C=${CARRY_DIR:-}
if [ -z "$C" ] || [ ! -x "$C/teexec" ]; then
  echo "building teexec and gemm_rate in $BUILD_DIR (meson, release)"
  if [ ! -d "$BUILD_DIR" ]; then
    meson setup "$BUILD_DIR" -Dbuildtype=release -Dtests=disabled > "$OUT/build.log" 2>&1 ||
      { tail -20 "$OUT/build.log"; echo "run_bench: meson setup failed (log: $OUT/build.log)"; exit 2; }
  fi
  ninja -C "$BUILD_DIR" tools/teexec bench/gpu/gemm_rate bench/gpu/quant_bandwidth \
    >> "$OUT/build.log" 2>&1 ||
    { tail -20 "$OUT/build.log"; echo "run_bench: build failed (log: $OUT/build.log)"; exit 2; }
  C=$BUILD_DIR/bin
  mkdir -p "$C"
  cp "$BUILD_DIR/tools/teexec" "$BUILD_DIR/bench/gpu/gemm_rate" \
    "$BUILD_DIR/bench/gpu/quant_bandwidth" "$C/"
  # a shared libteexec, where the build made one, goes beside the tool
  cp "$BUILD_DIR"/libteexec.so* "$C/" 2>/dev/null || true
fi
export CARRY_DIR=$C
echo "binaries: $C"

if [ "${SKIP_MLP:-0}" = 0 ]; then
  OUT=$OUT/mlp ITERS=${ITERS:-30} PAIRS=${PAIRS:-3} RECIPES="none fp8-current mxfp8" \
    bash bench/gpu/run_mlp_bench.sh > "$OUT/mlp.log" 2>&1
  echo "MLP block: exit $? (log: $OUT/mlp.log)"
fi
if [ "${SKIP_QUANT:-0}" = 0 ]; then
  if [ -x "$C/quant_bandwidth" ]; then
    # first, on an idle GPU
    "$C/quant_bandwidth" > "$OUT/quant.log" 2>&1
    echo "quantizers: exit $? (log: $OUT/quant.log)"
  else
    echo "quantizers: skipped, no $C/quant_bandwidth (bench/gpu/pack_carry.sh adds it)"
  fi
fi
if [ "${SKIP_GPT2:-0}" = 0 ]; then
  OUT=$OUT/gpt2 RECIPES="none fp8-current mxfp8" bash bench/gpu/run_gpt2_bench.sh \
    > "$OUT/gpt2.log" 2>&1
  echo "GPT-2 block: exit $? (log: $OUT/gpt2.log)"
fi

echo
echo "== goals (issue 7): ratios from this run; >1 = teexec faster =="
if [ -f "$OUT/mlp.log" ]; then
  grep -E '^(check|ratio)' "$OUT/mlp.log"
  echo "MLP runs (TFLOP/s) against cuBLASLt's own rate at the same shapes, same run:"
  grep -E '^(torch|teexec bench) ' "$OUT/mlp.log" | grep -v '^teexec bench pair'
  grep -E 'fp32-accumulate|per-tensor fast-accum' "$OUT/mlp.log" | head -4
fi
if [ -f "$OUT/gpt2.log" ]; then
  sed -n '/^GPT-2 block training step/,$p' "$OUT/gpt2.log"
  # mxfp8 on sm_90 against teexec's own bf16 step (goal: within 1.25x)
  awk '$1 == "teexec" && $2 == "cuda" { ms[$3] = $4 }
       END { if (ms["none"] > 0 && ms["mxfp8"] > 0)
               printf "ratio GPT-2 mxfp8 step / teexec bf16 step %.2fx (goal <= 1.25x)\n",
                      ms["mxfp8"] / ms["none"] }' "$OUT/gpt2.log"
fi
if [ -f "$OUT/quant.log" ]; then
  echo "Quantizers (bf16 input, GB/s against a device-to-device copy in the same run; goal >= 85%):"
  awk -F'|' '/^\| / && $5 ~ /%/ {
       name = $2; gsub(/^ +| +$/, "", name); pct = $5; gsub(/[ %]/, "", pct)
       if (name ~ /^copy/) next
       printf "  %-50s %4s%%  %s\n", name, pct, (pct + 0 >= 85 ? "met" : "not met")
     }' "$OUT/quant.log"
fi
