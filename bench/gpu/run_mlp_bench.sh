#!/bin/bash
# The MLP-block benchmark of issue 7 (a) and (c), on the GPU machine, in one
# run: PyTorch eager and torch.compile (bench/gpu/torch_mlp.py, which also
# writes the same model with the same weights as ONNX), teexec on that ONNX
# file through the public API (`teexec bench`, bf16 compute on the CUDA
# backend, under the recipes in RECIPES), a numeric check of teexec's
# inference against the float32 PyTorch module (`teexec run --input
# --output-dir`, relative L2) and cuBLASLt's own GEMM rate (gemm_rate).
# PAIRS=N adds N back-to-back rounds of PyTorch eager and teexec training
# steps and prints the median of their ratios.
# Binaries come from CARRY_DIR (built on the development machine:
# -Dstatic_protobuf=true -Dbuildtype=release).
#
# What is timed: torch's train_step is forward + MSE loss + backward + fused
# AdamW on its bf16 parameters (no master weights); "eager-autocast" is the
# same step of the FP32 module under bf16 autocast, whose AdamW updates FP32
# weights as teexec's does. `teexec bench --train` is a whole step too
# (forward, MSE loss, backward, AdamW over FP32 master weights). Inference
# is one forward on both sides.
set -u
C=${CARRY_DIR:-.carry/lead}
OUT=${OUT:-/tmp/mlp-bench}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$C:$PWD/$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
H=${HIDDEN:-4096}; F=${FFN:-16384}; T=${TOKENS:-8192}; ITERS=${ITERS:-30}

# teexec bench LABEL TOKENS MODEL [args]: one line "teexec bench LABEL ms=...
# min=... tflops=..." (FLOPs: 4*T*H*F per forward, 3x that per training step).
tb() {
  local label=$1 tokens=$2 model=$3
  shift 3
  if timeout 300 "$C/teexec" bench "$model" --device cuda --dtype bf16 --json "$@" \
      > "$OUT/tb.json" 2> "$OUT/tb.err"; then
    python3 -c "import json,sys
d=json.load(open(sys.argv[1])); fl=4.0*int(sys.argv[2])*int(sys.argv[3])*int(sys.argv[4])
fl*=3 if d['mode']=='train' else 1
print('teexec bench %s ms=%.4f min=%.4f tflops=%.1f' % (sys.argv[5], d['median_ms'], d['min_ms'], fl/(d['median_ms']*1e-3)/1e12))" \
      "$OUT/tb.json" "$tokens" "$H" "$F" "$label"
  else
    echo "teexec bench $label: failed: $(tail -1 "$OUT/tb.err")"
  fi
  rm -f "$OUT/tb.json" "$OUT/tb.err"
}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  echo "MLP block hidden=$H ffn=$F tokens=$T iters=$ITERS"
  python3 bench/gpu/torch_mlp.py --hidden $H --ffn $F --tokens $T --iters $ITERS --autocast --onnx "$OUT/mlp.onnx" --check-dir "$OUT" 2>&1 | grep -v Warning
  if [ -x "$C/teexec" ]; then
    # numbers first (teexec bench has no reference to compare with)
    for r in none fp8-current; do
      rm -rf "$OUT/y_teexec"
      if timeout 300 "$C/teexec" run "$OUT/mlp.onnx" --device cuda --dtype bf16 --recipe $r \
          --input "x=$OUT/x.npy" --output-dir "$OUT/y_teexec" > /dev/null 2> "$OUT/run.err"; then
        y=$(ls "$OUT"/y_teexec/*.npy | head -1)
        echo "check recipe=$r vs float32 PyTorch: $(python3 bench/gpu/torch_mlp.py --compare "$OUT/y.npy" "$y")"
      else
        echo "check recipe=$r: teexec run failed: $(tail -1 "$OUT/run.err")"
      fi
    done
    rm -rf "$OUT/y_teexec" "$OUT/run.err"
    for r in ${RECIPES:-none fp8-current mxfp8}; do
      tb "train_step recipe=$r" $T "$OUT/mlp.onnx" --train --recipe $r --iters $ITERS
    done
    tb "train_step recipe=none no-graphs" $T "$OUT/mlp.onnx" --train --iters $ITERS --no-graphs
    tb "inference recipe=none" $T "$OUT/mlp.onnx" --iters $ITERS
    tb "inference recipe=fp8-current" $T "$OUT/mlp.onnx" --iters $ITERS --recipe fp8-current
  else
    echo "teexec: not run ($C/teexec missing)"
  fi
  echo "latency: tokens=16"
  python3 bench/gpu/torch_mlp.py --hidden $H --ffn $F --tokens 16 --iters 200 --infer-only --onnx "$OUT/mlp16.onnx" 2>&1 | grep -v Warning
  if [ -x "$C/teexec" ]; then
    tb "inference tokens=16" 16 "$OUT/mlp16.onnx" --iters 200 --warmup 10
    tb "inference tokens=16 no-graphs" 16 "$OUT/mlp16.onnx" --iters 200 --warmup 10 --no-graphs
  fi
  [ -x $C/gemm_rate ] && timeout 120 $C/gemm_rate 2>&1 | tail -12
  # PyTorch's eager step moves by over 10% between processes on the shared
  # machine: PAIRS more rounds of (torch eager, teexec bf16, teexec
  # fp8-current) back to back, whose per-round ratios are summarized below
  if [ -x "$C/teexec" ]; then
    for i in $(seq 1 "${PAIRS:-0}"); do
      python3 bench/gpu/torch_mlp.py --hidden $H --ffn $F --tokens $T --iters $ITERS --no-compile \
        --onnx "$OUT/pair.onnx" 2>&1 | grep "eager train_step" | sed "s/^/pair $i /"
      tb "pair $i train_step recipe=none" $T "$OUT/pair.onnx" --train --iters $ITERS
      tb "pair $i train_step recipe=fp8-current" $T "$OUT/pair.onnx" --train --recipe fp8-current \
        --iters $ITERS
    done
  fi
} | tee "$OUT/mlp_bench.txt"
# the ratios of issue 7's goals, from the lines above
python3 - "$OUT/mlp_bench.txt" <<'PYEOF'
import re, sys
text = open(sys.argv[1]).read()
big, _, small = text.partition("latency: tokens=16")
def ms(part, pattern):
    m = re.search(pattern + r" ms=([0-9.]+)", part)
    return float(m.group(1)) if m else None
def ratio(label, num, den, goal):
    if num and den:
        print("ratio %-52s %.2fx (goal %s)" % (label, num / den, goal))
te, tc = ms(big, "torch eager train_step"), ms(big, "torch compile train_step")
ie, ic = ms(big, "torch eager inference"), ms(big, "torch compile inference")
bf = ms(big, "train_step recipe=none")
ratio("bf16 training step vs torch eager", te, bf, ">= 1.1x")
ratio("bf16 training step vs torch.compile", tc, bf, ">= 1.0x")
ratio("bf16 training step vs torch eager-autocast", ms(big, "torch eager-autocast train_step"), bf,
      "none: FP32 masters on both sides")
ratio("fp8-current training step vs torch eager-autocast", ms(big, "torch eager-autocast train_step"),
      ms(big, "train_step recipe=fp8-current"), "none: FP32 masters on both sides")
ratio("fp8-current training step vs torch bf16 eager", te, ms(big, "train_step recipe=fp8-current"), ">= 1.5x")
mx = ms(big, "train_step recipe=mxfp8")
if mx and bf:
    print("ratio %-52s %.2fx (goal <= 1.25x)" % ("mxfp8 step / teexec bf16 step", mx / bf))
ratio("bf16 inference vs torch eager", ie, ms(big, "inference recipe=none"), ">= 1.1x")
ratio("bf16 inference vs torch.compile", ic, ms(big, "inference recipe=none"), ">= 1.0x")
ratio("16-token inference (CUDA graph) vs torch eager", ms(small, "torch eager inference"),
      ms(small, "inference tokens=16"), ">= 1.3x")
# the back-to-back rounds: median of the per-round ratios
rounds = sorted(set(int(n) for n in re.findall(r"pair (\d+) ", text)))
for label, recipe, goal in (("bf16 training step vs torch eager", "none", ">= 1.1x"),
                            ("fp8-current training step vs torch bf16 eager", "fp8-current", ">= 1.5x")):
    rs = []
    for i in rounds:
        t = ms(text, "pair %d torch eager train_step" % i)
        e = ms(text, "pair %d train_step recipe=%s" % (i, recipe))
        if t and e:
            rs.append(t / e)
    if rs:
        rs.sort()
        print("ratio %-52s %.2fx median of %d rounds (%s) (goal %s)" % (
            label, rs[len(rs) // 2], len(rs), " ".join("%.2f" % r for r in rs), goal))
PYEOF
rm -f "$OUT"/*.onnx "$OUT"/*.npy
