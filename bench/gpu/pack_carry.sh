#!/bin/bash
# On the development machine: builds the binaries that the GPU scripts
# (run_gpu_suite.sh, run_bench.sh, run_mlp_bench.sh, run_gpt2_bench.sh) use
# on a GPU machine without protobuf-c or cmocka, and packs them for the
# device tool's `carry`:
#   BUILD_DIR (build-gpu): -Dstatic_protobuf=true -Dbuildtype=release
#     -Dtests=enabled, so the tools and tests link protobuf-c statically;
#   DEST (.carry/lead): every test_gpu_* program, teexec, gemm_rate,
#     kernel_bw, quant_bandwidth, test_zoo_cuda, run_node_tests and
#     examples/device_stream, stripped, with libcmocka.so.0 (the tests load
#     it);
#   DEST.tar.xz beside it when the directory is over the 64 MiB carry limit
#     (unpack it there first:
#     python3 -c "import tarfile; tarfile.open('DEST.tar.xz').extractall('.carry')").
#
#   bash bench/gpu/pack_carry.sh && ls .carry/lead
set -eu
BUILD_DIR=${BUILD_DIR:-build-gpu}
DEST=${DEST:-.carry/lead}
if [ ! -d "$BUILD_DIR" ]; then
  meson setup "$BUILD_DIR" -Dstatic_protobuf=true -Dbuildtype=release -Dtests=enabled
fi
ninja -C "$BUILD_DIR"
rm -rf "$DEST"
mkdir -p "$DEST"
find "$BUILD_DIR/tests/gpu" -maxdepth 1 -type f -executable -name 'test_gpu_*' \
  -exec cp {} "$DEST/" \;
# the zoo on the GPU (test_zoo_cuda: run as `test_zoo_cuda cuda`) and the
# ONNX node tests through the CUDA session, where this tree has them
for t in tests/zoo/test_zoo_cuda tests/conformance/run_node_tests examples/device_stream; do
  [ -x "$BUILD_DIR/$t" ] && cp "$BUILD_DIR/$t" "$DEST/"
done
cp "$BUILD_DIR/tools/teexec" "$BUILD_DIR/bench/gpu/gemm_rate" "$BUILD_DIR/bench/gpu/kernel_bw" \
  "$BUILD_DIR/bench/gpu/quant_bandwidth" "$DEST/"
cp -P "$(dirname "$(readlink -f "$(ldconfig -p | awk '/libcmocka.so.0 /{print $NF; exit}')")")"/libcmocka.so.0* \
  "$DEST/"
strip "$DEST"/test_gpu_* "$DEST/teexec" "$DEST/gemm_rate" "$DEST/kernel_bw" "$DEST/quant_bandwidth"
for t in test_zoo_cuda run_node_tests device_stream; do [ -f "$DEST/$t" ] && strip "$DEST/$t"; done
size=$(du -sm "$DEST" | cut -f1)
echo "$DEST: $(ls "$DEST" | wc -l) files, $size MiB"
if [ "$size" -gt 60 ]; then
  # one thread and a 256 MiB dictionary: the programs are 40-odd copies of
  # the same static library, which a dictionary larger than the whole tar
  # stores once (365 MiB -> 7 MiB, against 43 MiB with xz -6's 8 MiB; ~3 min)
  (cd "$(dirname "$DEST")" && tar cf - "$(basename "$DEST")" |
     xz -T1 --lzma2=preset=6,dict=256MiB > "$(basename "$DEST").tar.xz")
  echo "packed: $DEST.tar.xz ($(du -sm "$DEST.tar.xz" | cut -f1) MiB); carry it, not the directory"
fi
