#!/bin/sh
# bench/cpu/run_zoo.sh - every zoo export (models/zoo/*/model.onnx) on the
# CPU: teexec vs ONNX Runtime's CPU execution provider, same inputs (the
# export's own inputs/*.npy, batch 2 x 16 tokens), same thread count, both
# pinned to the same cores. Prints per model the median latencies and
# teexec/ORT, then the geometric mean, and appends a dated record to
# bench/results/cpu_zoo.md (issue 19's CPU goal: teexec/ORT <= 1.2).
#
# Environment (all optional): ITERS=50 THREADS=2 TEEXEC_BUILD=build/release
#   MESON_ARGS JOBS (as bench/cpu/run.sh), ONLY="gpt2_dynamo bert_dynamo"
#   (a subset), NO_RECORD=1, NOTE="..." (a remark for the record).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
iters=${ITERS:-50}
threads=${THREADS:-2}
build=${TEEXEC_BUILD:-build/release}
results=bench/results/cpu_zoo.md
py=/usr/bin/python3
pin=""
if command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge "$threads" ]; then
    pin="taskset -c 0-$((threads - 1))"
fi
if [ ! -d bench/cpu/node_modules/onnxruntime-node ]; then
    echo "run_zoo.sh: installing onnxruntime-node (npm ci)" >&2
    (cd bench/cpu && ONNXRUNTIME_NODE_INSTALL_CUDA=skip npm ci --no-audit --no-fund >&2)
fi
. scripts/setup.sh
teexec_install_packages
if [ ! -f "$build/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson setup "$build" --buildtype=release ${MESON_ARGS:-} >&2
fi
ninja -C "$build" -j "${JOBS:-2}" tools/teexec >&2

field() { printf '%s' "$1" | "$py" -c 'import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[k]
print(v)' "$2"; }

stamp=$(date -u '+%Y-%m-%d %H:%M UTC')
rows=""
ratios=""
for d in models/zoo/*/; do
    name=$(basename "$d")
    m="$d/model.onnx"
    [ -f "$m" ] || continue
    if [ -n "${ONLY:-}" ] && ! printf ' %s ' "$ONLY" | grep -q " $name "; then continue; fi
    args=""
    for f in "$d"/inputs/*.npy; do
        [ -f "$f" ] && args="$args --input $(basename "$f" .npy)=$f"
    done
    # shellcheck disable=SC2086
    if ! ort_json=$(OMP_NUM_THREADS=$threads $pin node bench/cpu/ort_bench.js "$m" $args \
            --iters "$iters" --warmup 3 --threads "$threads" 2>/dev/null); then
        rows="$rows| $name | failed | - | - |
"
        echo "$name: ORT failed" >&2
        continue
    fi
    ort=$(printf '%.3f' "$(field "$ort_json" median_ms)")
    # shellcheck disable=SC2086
    if tx_json=$(OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads $pin \
            "$build/tools/teexec" run "$m" --device cpu $args --iters "$iters" --json 2>/dev/null); then
        tx=$(printf '%.3f' "$(field "$tx_json" timing.median_ms)")
        r=$(printf '%s %s' "$tx" "$ort" | awk '{printf "%.2f", $1 / $2}')
        ratios="$ratios $r"
    else
        tx="failed"; r="-"
    fi
    printf '%-24s ORT %8s ms  teexec %8s ms  teexec/ORT %s\n' "$name" "$ort" "$tx" "$r"
    rows="$rows| $name | $ort | $tx | $r |
"
done
geo=$(printf '%s\n' $ratios | awk '{s += log($1); n++} END {if (n) printf "%.2f", exp(s / n); else print "-"}')
echo "geometric mean teexec/ORT: $geo (over $(printf '%s\n' $ratios | grep -c .) models)"
if [ -z "${NO_RECORD:-}" ]; then
    mkdir -p bench/results
    [ -f "$results" ] || printf '%s\n' "# CPU: teexec vs ONNX Runtime on the zoo exports" "" \
        "Median latency (ms) of ITERS runs after warm-up, the export's own inputs, both engines on the" \
        "same pinned cores and thread count. Goal (issue 19): teexec/ORT <= 1.2. Appended by" \
        "\`bench/cpu/run_zoo.sh\`, newest last." > "$results"
    {
        echo
        echo "## $stamp"
        echo
        echo "- command: \`ITERS=$iters THREADS=$threads bench/cpu/run_zoo.sh\`"
        echo "- machine: $(hostname), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), nproc $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg)"
        [ -n "${NOTE:-}" ] && echo "- note: $NOTE"
        echo "- geometric mean teexec/ORT: $geo"
        echo
        echo "| model | ORT ms | teexec ms | teexec/ORT |"
        echo "|---|---|---|---|"
        printf '%s' "$rows"
    } >> "$results"
fi
