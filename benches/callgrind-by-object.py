#!/usr/bin/env python3
"""Self cost (instructions, Ir) per ELF object in a callgrind output file.

    callgrind-by-object.py callgrind.out.PID

Prints one line per object, largest first, then the total. benches/run uses it to split a
daemon's instructions into "inside NVML" (the fake libnvidia-ml) and "outside NVML".
"""
import re
import sys
from collections import defaultdict

names = {}  # "(n)" -> name, for callgrind's name compression


def resolve(spec):
    m = re.match(r"\((\d+)\)\s*(.*)", spec)
    if not m:
        return spec
    if m.group(2):
        names[m.group(1)] = m.group(2)
    return names.get(m.group(1), spec)


cost = defaultdict(int)
ob = "?"
skip_next = False
with open(sys.argv[1]) as f:
    for line in f:
        line = line.rstrip("\n")
        if line.startswith("ob="):
            ob = resolve(line[3:])
        elif line.startswith("cob="):
            resolve(line[4:])  # register the name only
        elif line.startswith("calls="):
            skip_next = True  # the next cost line is the call's inclusive cost
        elif line and (line[0].isdigit() or line[0] in "+-*"):
            if skip_next:
                skip_next = False
                continue
            parts = line.split()
            if len(parts) >= 2:
                cost[ob] += int(parts[1])
total = sum(cost.values())
for name, ir in sorted(cost.items(), key=lambda kv: -kv[1]):
    print(f"{ir:>14} {name}")
print(f"{total:>14} total")
