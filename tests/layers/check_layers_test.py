#!/usr/bin/env python3
"""check_layers.py finds an upward include and a folder cycle, and passes a clean tree.

usage: check_layers_test.py PATH/TO/check_layers.py
"""
import os
import subprocess
import sys
import tempfile


def tree(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def run(checker, src, layers):
    p = subprocess.run([sys.executable, checker, "--src", src, "--layers", layers],
                       capture_output=True, text=True)
    return p.returncode, p.stderr


def main():
    checker = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as d:
        clean = os.path.join(d, "clean")
        tree(clean, {
            "low/a.h": "#pragma once\n#include <vector>\n",
            "low/a.cpp": '#include "low/a.h"\n',
            "high/b.cpp": '#include "low/a.h"\n#include "high/b.h"\n',
            "high/b.h": "#pragma once\n",
        })
        rc, err = run(checker, clean, "low,high")
        if rc != 0:
            failures.append(f"a clean tree failed: {err}")

        upward = os.path.join(d, "upward")
        tree(upward, {
            "low/a.cpp": '#include "high/b.h"\n',
            "high/b.h": "#pragma once\n",
        })
        rc, err = run(checker, upward, "low,high")
        if rc == 0 or "upward include" not in err or "low/a.cpp:1" not in err:
            failures.append(f"an upward include passed: rc={rc} {err}")

        # A cycle is reported even when the order given cannot say which edge is wrong.
        cycle = os.path.join(d, "cycle")
        tree(cycle, {
            "x/a.cpp": '#include "y/b.h"\n',
            "y/b.h": '#include "x/a.h"\n',
            "x/a.h": "#pragma once\n",
        })
        rc, err = run(checker, cycle, "x,y")
        if rc == 0 or "cycle: " not in err:
            failures.append(f"a cycle passed: rc={rc} {err}")

        unknown = os.path.join(d, "unknown")
        tree(unknown, {"new/a.cpp": "\n"})
        rc, err = run(checker, unknown, "low")
        if rc == 0 or "not in the layer order" not in err:
            failures.append(f"a folder outside the order passed: rc={rc} {err}")
    for f in failures:
        print(f"check_layers_test: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
