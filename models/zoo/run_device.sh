#!/bin/sh
# run_device.sh - regenerate the zoo on the lent GPU machine (the only place
# with torch 2.11, transformers, onnxscript and onnxruntime) and bring it
# back as $OUT/zoo.tgz, with the log in $OUT/zoo.log. A second pass
# regenerates everything and compares it byte for byte.
#
#   device run: sh models/zoo/run_device.sh
#   here:       tar xzf <files_at>/zoo.tgz -C models/   (then review, commit)
set -u
out=${OUT:?run this on the device machine, where OUT is set}
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
jobs=$(nproc 2>/dev/null || echo 4)
[ "$jobs" -gt 16 ] && jobs=16
{
    python3 -c 'import torch, transformers, onnx, onnxscript, onnxruntime as o; print("torch", torch.__version__, "transformers", transformers.__version__, "onnx", onnx.__version__, "onnxscript", onnxscript.__version__, "onnxruntime", o.__version__)'
    python3 "$here/make_zoo.py" --out "$out/zoo" --jobs "$jobs"
    echo "== determinism"
    python3 "$here/make_zoo.py" --out "$out/zoo" --check --jobs "$jobs"
} > "$out/zoo.log" 2>&1
tar czf "$out/zoo.tgz" -C "$out" zoo && rm -rf "$out/zoo"
tail -n 40 "$out/zoo.log"
