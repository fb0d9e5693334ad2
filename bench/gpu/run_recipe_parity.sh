#!/bin/bash
# CUDA against the CPU, per recipe, on the same model and inputs: runs each
# MODEL with `teexec run --recipe R` on --device cpu and --device cuda
# (seeded inputs, the same on both), writes the outputs and prints, per
# (model, recipe), the rel-L2 of CUDA's outputs against the CPU's and, for
# scale, of the recipe's outputs against recipe none's on the CPU. Each
# device runs the same plan (`teexec plan --explain --device D` shows it),
# so the quantized operands are the same; only the GEMMs differ (native FP8
# on sm_90 against FP32 on the dequantized operands).
#
#   TEEXEC=path/to/teexec OUT=dir bash bench/gpu/run_recipe_parity.sh MODEL...
#   RECIPES="none fp8-current mxfp8" (default: every recipe) DIMS="--dim B=2"
set -u
T=${TEEXEC:-teexec}
OUT=${OUT:-/tmp/recipe-parity}
RECIPES=${RECIPES:-"none fp8-delayed fp8-current fp8-block mxfp8 nvfp4"}
mkdir -p "$OUT"
for m in "$@"; do
  name=$(basename "$(dirname "$m")")
  [ "$(basename "$m")" = model.onnx ] || name=$(basename "$m" .onnx)
  for r in $RECIPES; do
    for d in cpu cuda; do
      dir=$OUT/$name/$r/$d
      mkdir -p "$dir"
      "$T" run "$m" --device $d --recipe $r ${DIMS:-} --output-dir "$dir" \
        > "$dir/log.txt" 2>&1 || echo "$name $r $d: rc=$? $(tail -n 1 "$dir/log.txt")"
    done
  done
done
python3 - "$OUT" <<'PY'
import sys, os, glob, numpy as np
out = sys.argv[1]
def rel(a, b):
    a = a.astype(np.float64).ravel(); b = b.astype(np.float64).ravel()
    n = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / (n if n > 0 else 1.0))
print("%-24s %-12s %-10s %12s %12s" % ("model", "recipe", "output", "cuda vs cpu", "cpu vs none"))
for model in sorted(os.listdir(out)):
    mdir = os.path.join(out, model)
    if not os.path.isdir(mdir): continue
    for r in sorted(os.listdir(mdir)):
        cdir, gdir, ndir = (os.path.join(mdir, r, "cpu"), os.path.join(mdir, r, "cuda"),
                            os.path.join(mdir, "none", "cpu"))
        for f in sorted(glob.glob(os.path.join(cdir, "*.npy"))):
            g = os.path.join(gdir, os.path.basename(f))
            a = np.load(f)
            if a.dtype.kind not in "fc": continue
            gv = "%12.3g" % rel(np.load(g), a) if os.path.exists(g) else "%12s" % "-"
            nf = os.path.join(ndir, os.path.basename(f))
            nv = "%12.3g" % rel(a, np.load(nf)) if os.path.exists(nf) else "%12s" % "-"
            print("%-24s %-12s %-10s %s %s" % (model, r, os.path.basename(f)[:-4][:10], gv, nv))
PY
