#!/bin/sh
# bench/cpu/run.sh - teexec vs ONNX Runtime (CPU execution provider) on the
# bench-size GPT-2 block (hidden 768, 12 heads, sequence 128), batch 1 and 8,
# both on 2 threads pinned to 2 cores. Prints the teexec/ORT latency ratio
# and appends a dated record to bench/results/cpu_gpt2_block.md.
#
# Environment (all optional):
#   ITERS=20                 timed runs per engine and batch (after warm-up)
#   THREADS=2                threads for both engines (and cores pinned)
#   TEEXEC_BUILD=build/release   release build dir of teexec (configured and
#                            built here with --buildtype=release)
#   MESON_ARGS="..."         extra options for a new TEEXEC_BUILD (e.g.
#                            -Dcuda=disabled -Dtests=disabled to build faster)
#   JOBS=2                   ninja's parallel jobs
#   BENCH_MODELS=/tmp/teexec-bench-gpt2   where the bench models are made
#   ORT_ONLY=1               skip the teexec side (record ORT only)
#   NO_RECORD=1              print, but do not append to bench/results/
#   NOTE="..."               a remark added to the record (e.g. machine busy)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
iters=${ITERS:-20}
threads=${THREADS:-2}
build=${TEEXEC_BUILD:-build/release}
models=${BENCH_MODELS:-${TMPDIR:-/tmp}/teexec-bench-gpt2}
results=bench/results/cpu_gpt2_block.md
py=/usr/bin/python3

# Pin both engines to the same cores when the machine has that many.
pin=""
if command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge "$threads" ]; then
    pin="taskset -c 0-$((threads - 1))"
fi

# OPENBLAS_CORETYPE pins OpenBLAS's kernels: "Haswell" (AVX2) on an AVX-512
# CPU costs teexec 20-40% here while ORT's MLAS picks AVX-512 by itself. The
# bench keeps whatever the caller set (or OpenBLAS's own detection) and
# records it; see README.md.
blas_core=${OPENBLAS_CORETYPE:-}
# OPENBLAS_THREAD_TIMEOUT (4..30: 2^N cycles an idle OpenBLAS thread spins
# before it sleeps) is kept as the caller set it and recorded: low values
# leave the cores to teexec's own threaded kernels (attention) between GEMMs.
blas_timeout=${OPENBLAS_THREAD_TIMEOUT:-}

# 1. ONNX Runtime for Node (bench/cpu/package.json pins the version).
if [ ! -d bench/cpu/node_modules/onnxruntime-node ]; then
    echo "run.sh: installing onnxruntime-node (npm ci)" >&2
    # Its install script would fetch the CUDA execution provider's binaries
    # from GitHub: unreachable from a build box, and the CPU bench needs none.
    (cd bench/cpu && ONNXRUNTIME_NODE_INSTALL_CUDA=skip npm ci --no-audit --no-fund >&2)
fi

# 2. teexec, release build (only the tool: the bench needs nothing else).
if [ -z "${ORT_ONLY:-}" ]; then
    . scripts/setup.sh
    teexec_install_packages
    if [ ! -f "$build/build.ninja" ]; then
        # shellcheck disable=SC2086
        meson setup "$build" --buildtype=release ${MESON_ARGS:-} >&2
    fi
    ninja -C "$build" -j "${JOBS:-2}" tools/teexec >&2
fi

# 3. The bench models (not committed: ~30 MB each).
for b in 1 8; do
    if [ ! -f "$models/b$b/model.onnx" ]; then
        echo "run.sh: making the bench GPT-2 block in $models" >&2
        . scripts/setup.sh
        teexec_install_packages "$TEEXEC_BENCH_PACKAGES" # PyTorch, onnx, numpy
        "$py" models/make_models.py --bench "$models" >&2
        break
    fi
done

json_field() { # json_field JSON_TEXT DOTTED.PATH
    printf '%s' "$1" | "$py" -c 'import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[k]
print(v)' "$2"
}

stamp=$(date -u '+%Y-%m-%d %H:%M UTC')
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || echo unknown)
rows=""
for b in 1 8; do
    m="$models/b$b/model.onnx"
    x="$models/b$b/inputs/x.npy"
    ort_json=$(OMP_NUM_THREADS=$threads $pin node bench/cpu/ort_bench.js "$m" --input "x=$x" \
        --iters "$iters" --warmup 3 --threads "$threads" --expected "$models/b$b/expected")
    ort_med=$(json_field "$ort_json" median_ms)
    ort_min=$(json_field "$ort_json" min_ms)
    ort_max=$(json_field "$ort_json" max_ms)
    ort_err=$(json_field "$ort_json" rel_l2.y)
    ort_ver=$(json_field "$ort_json" version)
    tx_cell="not run"
    ratio="-"
    if [ -z "${ORT_ONLY:-}" ]; then
        # teexec times --iters runs after one warm-up run; its JSON has
        # {"timing": {"iters", "min_ms", "median_ms", "max_ms"}}.
        if tx_json=$(OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads $pin \
                "$build/tools/teexec" run "$m" --device cpu --input "x=$x" \
                --iters "$iters" --json); then
            tx_med=$(json_field "$tx_json" timing.median_ms)
            tx_min=$(json_field "$tx_json" timing.min_ms)
            tx_max=$(json_field "$tx_json" timing.max_ms)
            tx_cell=$(printf '%.2f (%.2f / %.2f) ms' "$tx_med" "$tx_min" "$tx_max")
            ratio=$(printf '%s %s' "$tx_med" "$ort_med" | awk '{printf "%.2f", $1 / $2}')
        else
            tx_cell="failed (exit $?)"
        fi
    fi
    ort_cell=$(printf '%.2f (%.2f / %.2f)' "$ort_med" "$ort_min" "$ort_max")
    tx_row=${tx_cell% ms}
    echo "batch $b: ORT $ort_cell ms; teexec $tx_cell; teexec/ORT $ratio (ORT rel-L2 vs PyTorch $ort_err)"
    rows="$rows| $b | $ort_cell | $tx_row | $ratio |
"
done

if [ -z "${NO_RECORD:-}" ]; then
    mkdir -p bench/results
    if [ ! -f "$results" ]; then
        cat > "$results" <<'EOF'
# CPU: teexec vs ONNX Runtime on the GPT-2 style block

Model: `models/make_models.py --bench` (pre-LN GPT-2 block, hidden 768, 12 heads, MLP 3072,
sequence 128, float32, PyTorch 1.13 export at opset 17). Latency per run in milliseconds: median
(min / max) of ITERS timed runs after warm-up; both engines on the same cores with the same thread
count. Goal: teexec/ORT <= 1.5. Records are appended by `bench/cpu/run.sh`, newest last.
EOF
    fi
    {
        echo
        echo "## $stamp"
        echo
        if [ -n "${ORT_ONLY:-}" ]; then which="ORT_ONLY=1"; else which="TEEXEC_BUILD=$build"; fi
        echo "- command: \`ITERS=$iters THREADS=$threads $which bench/cpu/run.sh\`"
        echo "- machine: $(hostname), $cpu, nproc $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg)"
        if [ -n "${ORT_ONLY:-}" ]; then
            tx_desc="teexec not run"
        else
            tx_desc="$("$build/tools/teexec" --version 2>/dev/null || echo teexec) (release build, --device cpu, OPENBLAS_NUM_THREADS=$threads${blas_core:+, OPENBLAS_CORETYPE=$blas_core}${blas_timeout:+, OPENBLAS_THREAD_TIMEOUT=$blas_timeout})"
        fi
        echo "- engines: onnxruntime-node $ort_ver (CPU EP, intra-op threads $threads, graph optimization all); $tx_desc${pin:+; both pinned with \`$pin\`}"
        [ -n "${NOTE:-}" ] && echo "- note: $NOTE"
        echo
        echo "| batch | ORT ms | teexec ms | teexec/ORT |"
        echo "|---|---|---|---|"
        printf '%s' "$rows"
    } >> "$results"
    echo "run.sh: appended to $results" >&2
fi
