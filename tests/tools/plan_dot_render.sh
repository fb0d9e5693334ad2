#!/bin/sh
# plan_dot_render.sh TEEXEC SOURCE_ROOT - `teexec plan --dot` output must
# parse and render with Debian's graphviz (`dot -Tsvg`): a training plan with
# quantized edges and declined fusions, and an inference plan. Skips (exit
# 77) when graphviz is not installed: scripts/setup.sh lists it.
set -eu
teexec=$1
root=$2
if ! command -v dot >/dev/null 2>&1; then
    echo "plan_dot_render: SKIP: graphviz's 'dot' is not installed (apt-get install graphviz;" \
         "scripts/setup.sh installs it)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

render() {
    name=$1; shift
    "$teexec" plan "$root/models/$name/model.onnx" --dot "$@" > "$tmp/plan.dot"
    if ! dot -Tsvg "$tmp/plan.dot" -o "$tmp/plan.svg" 2> "$tmp/dot.err"; then
        echo "plan_dot_render: dot refused the graph of $name $*:" >&2
        cat "$tmp/dot.err" >&2
        exit 1
    fi
    # An svg with one cluster per group (graphviz writes a <g class="cluster">).
    grep -q '<svg' "$tmp/plan.svg" || { echo "plan_dot_render: no svg for $name" >&2; exit 1; }
    groups=$(grep -c '^  subgraph cluster_g[0-9]* {' "$tmp/plan.dot")
    clusters=$(grep -c 'class="cluster"' "$tmp/plan.svg")
    if [ "$groups" -lt 1 ] || [ "$clusters" -lt "$groups" ]; then
        echo "plan_dot_render: $name: $groups groups but $clusters clusters rendered" >&2
        exit 1
    fi
    echo "plan_dot_render: $name $*: $groups groups, $clusters clusters rendered"
}

render gpt2_block --train --recipe mxfp8 --device sm_90
render te_mlp --train --recipe nvfp4 --device sm_100
render mlp_opset14
