#!/usr/bin/env python3
"""Compares the loops of one kernel in two PTX files, register names aside.

Why: NVVM may emit a kernel's hot loops differently after an edit elsewhere in the same kernel (docs/bp.md:
a change to cuda-bp's loader code once cost the compute threads' step loops 15%). Without a disassembler,
comparing the loops' PTX says whether an edit that should leave them alone did.

A loop is a label that a later `bra` jumps back to; its text runs from the label to that branch. Registers
are renumbered per kind in order of first use within the loop (so the data flow must match, not just the
opcodes), and labels likewise. Loops with shuffles (the step loops of the message chains) are compared one
for one, in order.

Usage:
  nvcc ... -ptx backends/cuda/bp_cuda.cu -o base.ptx   (the committed code; then the edited code to new.ptx)
  tools/ptx_loops.py base.ptx new.ptx [--kernel FastTileKernelILi8ELi1E] [--show]
Exit status 0 when the loops with shuffles are identical, 1 otherwise. All loops are also matched as a
multiset, and those with fewer copies in the other file are listed (label, length) to look up in the PTX.
"""
import argparse
from collections import Counter
import re
import sys

REGISTER = re.compile(r"%([a-z]+)(\d+)\b")
LABEL = re.compile(r"\$L__BB\d+_\d+")
ANONYMOUS = re.compile(r"_GLOBAL__N__[0-9a-f]+_")  # the anonymous namespace's hash changes with the file


def kernel_body(path, kernel):
    """The lines of the first .entry whose name contains `kernel`, up to its closing brace."""
    lines = open(path).read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith(".entry") and kernel in l), None)
    if start is None:
        sys.exit(f"{path}: no .entry containing {kernel}")
    depth, body = 0, []
    for line in lines[start:]:
        body.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0 and "}" in line:
            break
    return body


def normalise(lines):
    """The loop's instructions, registers and labels renumbered in order of first appearance."""
    names, counts = {}, {}

    def rename(kind, name):
        if name not in names:
            names[name] = f"{kind}{counts.get(kind, 0)}"
            counts[kind] = counts.get(kind, 0) + 1
        return names[name]

    out = []
    for line in lines:
        line = line.split("//")[0].strip()
        if not line:
            continue
        line = REGISTER.sub(lambda m: "%" + rename(m.group(1), m.group(0)), line)
        line = LABEL.sub(lambda m: rename("L", m.group(0)), line)
        line = ANONYMOUS.sub("_GLOBAL__N__", line)
        out.append(re.sub(r"\s+", " ", line))
    return out


def loops(body):
    """(label, normalised text) of each loop, in order of the label."""
    where = {}
    for i, line in enumerate(body):
        m = re.match(r"^(\$L__BB\d+_\d+):", line)
        if m:
            where[m.group(1)] = i
    found = {}
    for i, line in enumerate(body):
        m = re.search(r"\bbra(?:\.uni)?\s+(\$L__BB\d+_\d+);", line)
        if m and m.group(1) in where and where[m.group(1)] < i:
            start = where[m.group(1)]
            found[start] = max(found.get(start, 0), i)  # the last backward branch closes the loop
    return [(body[s].rstrip(":"), normalise(body[s:e + 1])) for s, e in sorted(found.items())]


def shuffles(text):
    return sum("shfl." in l for l in text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--kernel", default="FastTileKernelILi8ELi1E")
    ap.add_argument("--show", action="store_true", help="print the first differing line of each differing loop")
    a = ap.parse_args()
    base, new = loops(kernel_body(a.base, a.kernel)), loops(kernel_body(a.new, a.kernel))
    base_hot = [t for _, t in base if shuffles(t)]
    new_hot = [t for _, t in new if shuffles(t)]
    ok = len(base_hot) == len(new_hot)
    print(f"loops with shuffles: {len(base_hot)} / {len(new_hot)}")
    for k, (b, n) in enumerate(zip(base_hot, new_hot)):
        same = b == n
        ok &= same
        print(f"  shuffle loop {k}: {len(b)} / {len(n)} instructions, {shuffles(b)} shfl, "
              f"{'identical' if same else 'DIFFERENT'}")
        if not same and a.show:
            d = next((i for i, (x, y) in enumerate(zip(b, n)) if x != y), min(len(b), len(n)))
            print(f"    first difference at line {d}:\n      {b[d] if d < len(b) else '<end>'}\n"
                  f"      {n[d] if d < len(n) else '<end>'}")
    # The other loops, matched as a multiset: an edit may rightly remove or reshape loops elsewhere.
    unmatched_new = Counter(tuple(t) for _, t in new)
    unmatched_new.subtract(Counter(tuple(t) for _, t in base))
    unmatched_base = [(label, len(t)) for label, t in base if unmatched_new[tuple(t)] < 0]
    print(f"loops: {len(base)} / {len(new)} ({'same count' if len(base) == len(new) else 'count differs'})")
    print(f"  only in {a.base} (label, instructions): {unmatched_base}")
    print(f"  only in {a.new}: {[(label, len(t)) for label, t in new if unmatched_new[tuple(t)] > 0]}")
    print("step loops identical" if ok else "step loops DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
