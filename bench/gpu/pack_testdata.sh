#!/bin/sh
# Packs the ONNX node tests that tests/conformance/claimed.txt claims, from
# this machine's libonnx-testdata, as .carry/testdata.tar.xz (about 0.3 MB):
# the device machine has no libonnx-testdata, and run_check_device.sh
# unpacks this to run the claimed tests through the CUDA session.
set -eu
D=${TESTDATA:-/usr/share/libonnx-testdata/data}
mkdir -p .carry
grep -v '^#' tests/conformance/claimed.txt | sed 's/[[:space:]].*//' | grep . |
  while read -r t; do
    case $t in */*) p=$t ;; *) p=node/$t ;; esac
    [ -d "$D/$p" ] && echo "$p"
  done > .carry/testdata.list
tar -C "$D" -cf - -T .carry/testdata.list | xz -6 > .carry/testdata.tar.xz
echo ".carry/testdata.tar.xz: $(wc -l < .carry/testdata.list) tests, $(du -k .carry/testdata.tar.xz | cut -f1) KiB"
