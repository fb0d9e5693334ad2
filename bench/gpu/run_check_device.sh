#!/bin/bash
# One device call that checks the GPU side of the tree: unpacks the carried
# binaries (bench/gpu/pack_carry.sh), runs the gpu suite (run_gpu_suite.sh),
# the zoo on the GPU (test_zoo_cuda cuda) and, where carried, the ONNX node
# tests through the CUDA session; logs under $OUT, a summary last.
#
#   device run, carry .carry/lead.tar.xz and .carry/testdata.tar.xz:
#     bash bench/gpu/run_check_device.sh
# The device machine has no libonnx-testdata: .carry/testdata.tar.xz holds
# the claimed node tests (tests/conformance/claimed.txt) from this machine's
# /usr/share/libonnx-testdata/data, made by bench/gpu/pack_testdata.sh;
# without it the node tests are skipped.
set -u
OUT=${OUT:?}
if [ -f .carry/lead.tar.xz ] && [ ! -d .carry/lead ]; then
  python3 -c "import tarfile; tarfile.open('.carry/lead.tar.xz').extractall('.carry')"
fi
if [ -f .carry/testdata.tar.xz ] && [ ! -d .carry/testdata ]; then
  mkdir -p .carry/testdata
  python3 -c "import tarfile; tarfile.open('.carry/testdata.tar.xz').extractall('.carry/testdata')"
fi
[ -d .carry/testdata/node ] && export TEEXEC_TESTDATA=$PWD/.carry/testdata
C=.carry/lead
export TEEXEC_SOURCE_ROOT=$PWD
export LD_LIBRARY_PATH=$PWD/$C:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
CARRY_DIR=$C OUT=$OUT SUITE_TIMEOUT=${SUITE_TIMEOUT:-240} bash bench/gpu/run_gpu_suite.sh \
  > "$OUT/suite.txt" 2>&1
if [ -x "$C/test_zoo_cuda" ]; then
  timeout "${ZOO_TIMEOUT:-420}" "$C/test_zoo_cuda" cuda > "$OUT/zoo_cuda.txt" 2>&1
  echo "test_zoo_cuda rc=$?" >> "$OUT/zoo_cuda.txt"
fi
if [ -x "$C/run_node_tests" ]; then
  timeout 240 "$C/run_node_tests" --device cuda > "$OUT/node_cuda.txt" 2>&1
  echo "run_node_tests --device cuda rc=$?" >> "$OUT/node_cuda.txt"
fi
grep -E " rc=" "$OUT/suite.txt"
grep -E "^\[  FAILED  \]|^\[  ERROR   \]" "$OUT/suite.txt" | head -20
grep -cE " ok " "$OUT/zoo_cuda.txt" 2>/dev/null | sed 's/^/zoo_cuda checks ok: /'
grep -E "FAILED:" "$OUT/zoo_cuda.txt" 2>/dev/null | cut -c1-160 | head -60
tail -n 2 "$OUT/zoo_cuda.txt" "$OUT/node_cuda.txt" 2>/dev/null
