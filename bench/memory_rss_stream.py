#!/usr/bin/env python3
"""Resident memory over one long `channel stream --turns --memory` run (issue 12: RSS flat).

Streams about --tokens tokens of the CMake reference text installed on any Debian machine that
builds Channel (/usr/share/cmake-*/Help, paragraphs in a fixed shuffled order, repeated if
needed) through one `channel stream -f TEXT --turns --memory STORE` run, and at every stats
line reads /proc/PID/status of the stream: RssAnon (heap, KV arenas) and RssFile (mapped file
pages: the model and the episodic store). Works with any build, old or new, since it reads
/proc itself; a build whose stats lines carry rss_anon_bytes / rss_file_bytes is checked
against them.

Usage:
  bench/memory_rss_stream.py --channel build/channel --model models/channel-bounded.gguf \
      --tokens 300000 --out /tmp/rss [--threads 2] [--label after]
Prints one JSON line per stats line ({"clock", "anon_mib", "file_mib"}) and a summary line:
first / after-warm-up min and max of each part and the file part's growth per 10^5 tokens
after warm-up (the first 10 % of the lines). A benchmark, not a test: the bounded-residency
test is tests/unit/memory_residency_test.cpp.
"""
import argparse
import glob
import json
import os
import random
import subprocess
import sys
import time


def paragraphs():
    out = []
    for path in sorted(glob.glob("/usr/share/cmake-*/Help/**/*.rst", recursive=True)):
        with open(path, encoding="utf-8", errors="replace") as fh:
            for p in fh.read().split("\n\n"):
                p = p.strip()
                if len(p) > 40:
                    out.append(p)
    return out


def status_kib(pid):
    got = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            k, _, v = line.partition(":")
            if k in ("RssAnon", "RssFile", "RssShmem"):
                got[k] = int(v.split()[0])
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--channel", default="build/channel")
    ap.add_argument("--model", default="models/channel-bounded.gguf")
    ap.add_argument("--tokens", type=int, default=300_000)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stats-every", type=int, default=4096)
    ap.add_argument("--label", default="")
    ap.add_argument("--chars-per-token", type=float, default=3.6)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    text = os.path.join(args.out, "stream.txt")
    store = os.path.join(args.out, "stream.episodic.mem")
    if os.path.exists(store):
        os.remove(store)
    paras = paragraphs()
    if not paras:
        sys.exit("memory_rss_stream: no /usr/share/cmake-*/Help text found")
    random.Random(2026).shuffle(paras)
    need, body, n, i = int(args.tokens * args.chars_per_token), [], 0, 0
    while n < need:
        body.append(paras[i % len(paras)])
        n += len(body[-1]) + 2
        i += 1
    with open(text, "w", encoding="utf-8") as fh:
        fh.write("\n\n".join(body) + "\n")
    capacity = max(4096, args.tokens // 24)  # room for every episode, as the e2e bench
    cmd = [args.channel, "stream", "-m", args.model, "-f", text, "--turns", "--memory", store,
           "-t", str(args.threads), "--stats-every", str(args.stats_every),
           "--memory-capacity", str(capacity), "--tokens", str(args.tokens)]
    print("$", " ".join(cmd), file=sys.stderr)
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    curve = []
    for line in p.stdout:
        if not line.startswith("{") or "rss_bytes" not in line:
            continue
        st = status_kib(p.pid)
        rec = json.loads(line)
        pt = dict(clock=rec.get("clock"), anon_mib=round(st["RssAnon"] / 1024, 1),
                  file_mib=round(st["RssFile"] / 1024, 1))
        if "rss_file_bytes" in rec:
            pt["stats_file_mib"] = round(rec["rss_file_bytes"] / 2**20, 1)
            pt["stats_anon_mib"] = round(rec["rss_anon_bytes"] / 2**20, 1)
        curve.append(pt)
        print(json.dumps(pt), flush=True)
    p.wait()
    wall = time.time() - t0
    warm = curve[len(curve) // 10:]
    summary = dict(label=args.label, tokens=curve[-1]["clock"] if curve else 0,
                   seconds=round(wall, 1), lines=len(curve))
    if warm:
        for part in ("anon_mib", "file_mib"):
            summary[part + "_first"] = curve[0][part]
            summary[part + "_warm_min"] = min(x[part] for x in warm)
            summary[part + "_warm_max"] = max(x[part] for x in warm)
            summary[part + "_last"] = curve[-1][part]
        span = (warm[-1]["clock"] - warm[0]["clock"]) or 1
        summary["file_mib_per_1e5_tokens"] = round(
            (warm[-1]["file_mib"] - warm[0]["file_mib"]) * 1e5 / span, 2)
    print(json.dumps(summary), flush=True)
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
