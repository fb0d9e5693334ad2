#!/bin/sh
# setup.sh - shared by scripts/run and scripts/test: make sure the Debian
# packages teexec needs are installed, then configure and build a build dir.
#
#   . scripts/setup.sh; teexec_setup BUILD_DIR [meson options...]
#
# As root, missing packages are installed with apt-get. Otherwise the exact
# apt-get line is printed and the script exits 2.

TEEXEC_PACKAGES="meson ninja-build pkg-config gcc protobuf-c-compiler libprotobuf-c-dev \
libonnx-dev libonnx-testdata libcmocka-dev zlib1g-dev libopenblas-dev clang \
libclang-rt-14-dev graphviz"

# Tools that only the benchmarks need (bench/cpu makes its models with
# PyTorch): installed by the bench scripts, not by scripts/test.
TEEXEC_BENCH_PACKAGES="python3-numpy python3-onnx python3-torch"

# teexec_missing_packages [PACKAGES]: those of PACKAGES (default
# TEEXEC_PACKAGES) not installed.
teexec_missing_packages() {
    missing=""
    for p in ${1:-$TEEXEC_PACKAGES}; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            missing="$missing $p"
        fi
    done
    echo "$missing"
}

# teexec_install_packages [PACKAGES]: installs the missing ones.
teexec_install_packages() {
    missing=$(teexec_missing_packages "${1:-}")
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "teexec: missing Debian packages; install them with:" >&2
        echo "  sudo apt-get install -y$missing" >&2
        exit 2
    fi
    echo "teexec: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || { echo "teexec: apt-get update failed" >&2; exit 2; }
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >&2 ||
        { echo "teexec: apt-get install failed" >&2; exit 2; }
}

# teexec_setup BUILD_DIR [meson args]: configure once, then (re)build.
# TEEXEC_TARGETS (space-separated ninja targets) builds only those; unset,
# everything (the tests and the GPU test programs too).
teexec_setup() {
    dir=$1; shift
    teexec_install_packages
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" "$@" >&2 || { echo "teexec: meson setup failed" >&2; exit 2; }
    fi
    # shellcheck disable=SC2086
    ninja -C "$dir" ${TEEXEC_TARGETS:-} >&2 || { echo "teexec: build failed" >&2; exit 2; }
}
