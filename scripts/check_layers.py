#!/usr/bin/env python3
"""Checks that every #include "folder/..." under src/ points down the layer order.

The order (bottom first) is the one of docs/architecture.md and of the per-folder libraries
in src/CMakeLists.txt, which passes it as --layers. A folder may include itself and any
folder below it; anything else is an upward include and fails the build. The script also
checks that the folder graph the includes form has no cycle (it cannot when every edge
points down, but the check does not rely on the order being right).

usage: check_layers.py --src SRC --layers util,gguf,... [--stamp FILE]
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(rel):
    """The layer a path under src/ belongs to: its first directory."""
    return rel.split("/", 1)[0] if "/" in rel else None


def find_cycle(graph):
    """A cycle of the directed graph {node: set(nodes)} as a list, or None."""
    state = {}  # 1 = on the stack, 2 = done
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--layers", required=True, help="comma-separated, bottom first")
    ap.add_argument("--stamp", help="touched when the check passes (a build step's output)")
    args = ap.parse_args()

    order = args.layers.split(",")
    rank = {name: i for i, name in enumerate(order)}
    errors = []
    graph = {}
    for root, _, files in os.walk(args.src):
        for name in sorted(files):
            if not name.endswith((".h", ".hpp", ".cpp", ".c", ".cu", ".cuh")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, args.src)
            here = folder_of(rel)
            if here is None:
                continue
            if here not in rank:
                errors.append(f"{rel}: folder src/{here} is not in the layer order")
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = folder_of(m.group(1))
                    if target is None or target not in rank or target == here:
                        continue  # same folder, a local header, or not one of ours
                    graph.setdefault(here, set()).add(target)
                    if rank[target] > rank[here]:
                        errors.append(
                            f"src/{rel}:{lineno}: upward include of \"{m.group(1)}\" "
                            f"({here} is below {target} in the layer order)")
    cycle = find_cycle(graph)
    if cycle:
        errors.append("folder dependency cycle: " + " -> ".join(cycle))
    if errors:
        for e in errors:
            print(f"check_layers: {e}", file=sys.stderr)
        print(f"check_layers: {len(errors)} problem(s); the order is {' < '.join(order)} "
              "(docs/architecture.md)", file=sys.stderr)
        return 1
    if args.stamp:
        with open(args.stamp, "w") as f:
            f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
