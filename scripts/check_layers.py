#!/usr/bin/env python3
"""check_layers.py - fail on an #include that goes the wrong way.

teexec's layers use each other one way (DESIGN.md section 1):

    base  <-  format  ->  import  ->  planner  ->  exec  ->  tools
                                    kernels (used by exec only)

Every `#include "..."` in the C/CUDA sources of the layer folders is
resolved the way the compiler resolves it (the including file's folder,
then the source root, then include/) and its target's layer must be one
that the including layer may use (ALLOWED below). Protobuf-c's generated
code (onnx.pb-c.h and its Onnx__ / onnx__ names) belongs to format/ only:
the include and the names are reported anywhere else.

Violations are printed as `file:line: message` and the exit status is 1.
LAYERING_ALLOW (scripts/layering_allow.txt) lists the violations not fixed
yet, one per line with its reason; an entry that no longer matches a
violation is itself an error, so the list can only shrink.

    check_layers.py [--root DIR] [--allow FILE]
    check_layers.py --self-test      (proves the check catches what it should)
"""

import argparse
import os
import re
import sys
import tempfile

# Which layers each layer may include (its own included). include/ is the
# public header, usable by all; tools/ may use nothing else (the CLI uses
# only the public API).
ALLOWED = {
    "include": {"include"},
    "base": {"base", "include"},
    "format": {"base", "format", "include"},
    "import": {"base", "format", "import", "include"},
    "planner": {"base", "format", "import", "planner", "include"},
    "kernels": {"base", "kernels", "include"},
    "exec": {"base", "format", "import", "planner", "kernels", "exec", "include"},
    "tools": {"tools", "include"},
}
LAYERS = sorted(ALLOWED)
SUFFIXES = (".c", ".h", ".cu", ".cuh")
# Headers generated into the build tree: the build configuration may be
# used anywhere; the protobuf header only in format/.
GENERATED_OK = {"teexec_config.h"}
PROTOBUF_HEADER = "onnx.pb-c.h"
PROTOBUF_LAYER = "format"

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
PROTOBUF_NAME_RE = re.compile(r"\b(Onnx__\w+|onnx__\w+)")


def source_files(root):
    for layer in LAYERS:
        top = os.path.join(root, layer)
        for folder, dirs, files in os.walk(top):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(SUFFIXES):
                    yield os.path.relpath(os.path.join(folder, name), root)


def layer_of(rel):
    return rel.split("/", 1)[0]


def resolve(root, rel, target):
    """The include's path relative to root, or None when not in the tree."""
    for base in (os.path.dirname(rel), "", "include"):
        cand = os.path.normpath(os.path.join(base, target))
        if not cand.startswith("..") and os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def strip_comments(lines):
    """Yields (line number, code) with comments and string literals blanked,
    so a comment that names Onnx__ModelProto is not a use of it."""
    in_block = False
    for n, line in enumerate(lines, 1):
        out = []
        i = 0
        while i < len(line):
            if in_block:
                end = line.find("*/", i)
                if end < 0:
                    i = len(line)
                else:
                    in_block = False
                    i = end + 2
                continue
            c = line[i]
            if line.startswith("/*", i):
                in_block = True
                i += 2
            elif line.startswith("//", i):
                break
            elif c == '"':
                j = i + 1
                while j < len(line) and line[j] != '"':
                    j += 2 if line[j] == "\\" else 1
                out.append('""')
                i = j + 1
            else:
                out.append(c)
                i += 1
        yield n, "".join(out)


def violations(root):
    """Returns [(file, line, key, message)]; key is what an allow-list entry
    names: the included path, or `protobuf`."""
    found = []
    for rel in source_files(root):
        layer = layer_of(rel)
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        for n, line in enumerate(lines, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            target = m.group(1)
            name = os.path.basename(target)
            if name == PROTOBUF_HEADER:
                if layer != PROTOBUF_LAYER:
                    found.append((rel, n, "protobuf",
                                  f'includes "{target}": protobuf-c code belongs to format/ only'))
                continue
            if name in GENERATED_OK:
                continue
            path = resolve(root, rel, target)
            if path is None:
                found.append((rel, n, target,
                              f'includes "{target}", which is not in the source tree'))
                continue
            to = layer_of(path)
            if to not in ALLOWED[layer]:
                found.append((rel, n, path,
                              f'{layer}/ includes {path}: {layer}/ may use only '
                              + ", ".join(sorted(ALLOWED[layer]))))
        if layer != PROTOBUF_LAYER:
            for n, code in strip_comments(lines):
                m = PROTOBUF_NAME_RE.search(code)
                if m:
                    found.append((rel, n, "protobuf",
                                  f"uses {m.group(1)}: protobuf structs belong to format/ only"))
    return found


def read_allow(path):
    """Entries `FILE KEY REASON...`; '#' starts a comment line."""
    entries = []
    if not path:
        return entries
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 3:
                raise SystemExit(f"{path}:{n}: an entry is FILE KEY REASON (the reason is required)")
            entries.append((parts[0], parts[1], parts[2], n))
    return entries


def check(root, allow_path, out):
    found = violations(root)
    allow = read_allow(allow_path)
    allowed = {(f, k) for f, k, _, _ in allow}
    used = set()
    bad = 0
    for rel, n, key, msg in found:
        if (rel, key) in allowed:
            used.add((rel, key))
            continue
        print(f"{rel}:{n}: {msg}", file=out)
        bad += 1
    for f, k, _, n in allow:
        if (f, k) not in used:
            print(f"{allow_path}:{n}: stale entry '{f} {k}': no such violation any more; "
                  "delete the line (the list only shrinks)", file=out)
            bad += 1
    if bad:
        print(f"check_layers: {bad} problem(s); layer rules in scripts/check_layers.py", file=out)
    else:
        print(f"check_layers: includes go one way ({len(found)} allow-listed)", file=out)
    return 1 if bad else 0


def self_test():
    """Builds a small tree with one violation of each kind and asserts the
    exact file:line list, so the check is known to be able to fail."""
    files = {
        "base/a.h": '#include "base/b.h"\n#include "format/f.h"\n',
        "base/b.h": "",
        "format/f.h": '#include "onnx.pb-c.h"\nOnnx__ModelProto *m;\n',
        "import/i.c": '#include "format/f.h"\n/* Onnx__GraphProto in a comment */\n'
                      'const char *s = "onnx__x";\nconst Onnx__GraphProto *g;\n',
        "planner/plan.h": '#include "import/i.c"\n#include "kernels/cpu/q.h"\n'
                          '#include "exec/e.h"\n',
        "kernels/cpu/q.h": '#include "base/b.h"\n#include "../../format/f.h"\n',
        "kernels/cpu/k.c": '#include "q.h"\n#include "teexec_config.h"\n',
        "exec/e.h": '#include "kernels/cpu/q.h"\n#include "onnx.pb-c.h"\n',
        "exec/e.c": '#include "e.h"\n#include "missing.h"\n',
        "tools/t.c": '#include "exec/e.h"\n#include "teexec/teexec.h"\n',
        "include/teexec/teexec.h": "",
        "allow.txt": "# comment\nexec/e.h protobuf being moved\nexec/e.c gone.h stale one\n",
    }
    expect = {
        "base/a.h:2", "import/i.c:4", "planner/plan.h:2", "planner/plan.h:3",
        "kernels/cpu/q.h:2", "exec/e.c:2", "tools/t.c:1", "allow.txt:3",
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)) or root, exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)

        class Lines:
            def __init__(self):
                self.text = ""

            def write(self, s):
                self.text += s

        out = Lines()
        allow = os.path.join(root, "allow.txt")
        rc = check(root, allow, out)
        got = set()
        for line in out.text.splitlines():
            loc = line.split(": ", 1)[0]
            if loc.startswith(root + "/"):
                loc = loc[len(root) + 1:]
            if ":" in loc:
                got.add(loc)
        if rc != 1 or got != expect:
            print(out.text, end="")
            print(f"self-test FAILED: rc {rc}; missing {sorted(expect - got)}, "
                  f"unexpected {sorted(got - expect)}")
            return 1
    print(f"check_layers self-test: all {len(expect)} planted violations reported")
    return 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(here))
    ap.add_argument("--allow", default=None,
                    help="allow-list (default: scripts/layering_allow.txt under --root)")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    allow = a.allow
    if allow is None:
        allow = os.path.join(a.root, "scripts", "layering_allow.txt")
        if not os.path.isfile(allow):
            allow = None
    return check(a.root, allow, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
