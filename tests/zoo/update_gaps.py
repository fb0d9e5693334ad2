#!/usr/bin/env python3
"""update_gaps.py - after `test_zoo` (or `test_zoo cuda`) reports listed gaps
that pass now, drop their lines from the gaps file and refresh the reasons of
the ones still failing. It never adds a line: a new failure must be fixed or
listed by hand, with a reason.

    build/rel/tests/zoo/test_zoo > /tmp/zoo.txt 2>&1
    python3 tests/zoo/update_gaps.py /tmp/zoo.txt [tests/zoo/expected_gaps.txt]
"""
import re
import sys


def main():
    log = open(sys.argv[1]).read()
    path = sys.argv[2] if len(sys.argv) > 2 else "tests/zoo/expected_gaps.txt"
    still = {}
    for line in log.splitlines():
        m = re.match(r"^# (\S+)\s+(\S+)\s+GAP\s+(.*) \(listed\)$", line)
        if m:
            still[(m.group(1), m.group(2))] = m.group(3)
    kept, dropped = [], 0
    for line in open(path).read().splitlines():
        if line.startswith("#") or not line.strip():
            kept.append(line)
            continue
        key = tuple(line.split()[:2])
        if key in still:
            kept.append(f"{key[0]} {key[1]} {still[key]}"[:240])
        else:
            dropped += 1
    open(path, "w").write("\n".join(kept) + "\n")
    print(f"{path}: {dropped} lines dropped, {sum(1 for l in kept if l and not l.startswith('#'))} left")


if __name__ == "__main__":
    main()
