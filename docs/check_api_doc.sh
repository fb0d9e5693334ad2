#!/bin/sh
# check_api_doc.sh HEADER DOC - fails unless DOC (docs/api.md) mentions every
# TEEXEC_API function HEADER (include/teexec/teexec.h) declares, and calls
# no teexec_*() function that HEADER lacks (a renamed or removed one).
set -eu
header=$1
doc=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A declaration starts its line with TEEXEC_API and has the function's name
# and its opening parenthesis on that line.
grep -E '^TEEXEC_API ' "$header" |
    sed -E 's/^[^(]*[ *](teexec_[a-z0-9_]+)\(.*$/\1/' | sort -u > "$tmp/api"
if [ ! -s "$tmp/api" ] || grep -qvE '^teexec_[a-z0-9_]+$' "$tmp/api"; then
    echo "check_api_doc: cannot read the declarations of $header:" >&2
    grep -vE '^teexec_[a-z0-9_]+$' "$tmp/api" >&2 || true
    exit 1
fi

grep -oE 'teexec_[a-z0-9_]+' "$doc" | sort -u > "$tmp/mentioned" || true
grep -oE 'teexec_[a-z0-9_]+\(' "$doc" | sed 's/($//' | sort -u > "$tmp/called" || true
status=0
missing=$(comm -23 "$tmp/api" "$tmp/mentioned")
if [ -n "$missing" ]; then
    echo "check_api_doc: $doc does not document:" >&2
    echo "$missing" | sed 's/^/  /' >&2
    status=1
fi
stale=$(comm -23 "$tmp/called" "$tmp/api")
if [ -n "$stale" ]; then
    echo "check_api_doc: $doc names functions $header does not declare:" >&2
    echo "$stale" | sed 's/^/  /' >&2
    status=1
fi
[ $status = 0 ] && echo "check_api_doc: all $(wc -l < "$tmp/api") functions documented"
exit $status
