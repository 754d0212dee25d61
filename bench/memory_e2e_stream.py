#!/usr/bin/env python3
"""End-to-end episodic memory through the command line only (issue: episodic memory, point 9).

1. Plants 24 facts ("Remember this: the access code of Vera Okafor is 48213.") as paragraphs
   of their own in about 120,000 tokens of filler text (this repository's docs and sources),
   and streams the whole text through one `channel stream --turns --memory STORE` run: a
   4096-slot window that wraps about 30 times, everything evicted consolidated into STORE.
2. For each fact, asks `channel mem query --json` with a cue that paraphrases the fact as a
   question ("Question: What is the access code of Vera Okafor?") and reports recall@1 and
   recall@3 of the episode that holds it (found with `channel mem ls --json`).
3. With --answer, asks the model the question with `channel run --memory STORE --recall-only`
   (greedy, 8 tokens) without recall (--recall-k 0) and with the top 1 and top 3 episodes
   recalled into tier 3, and reports how often the answer contains the fact's value.

Usage: bench/memory_e2e_stream.py --channel build/channel --model models/channel-bounded.gguf \
           --out /tmp/e2e [--tokens 120000] [--threads 2] [--answer]
Prints a per-fact table and a final JSON line with the totals. Takes minutes: it is a
benchmark, not a test.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import time

FIRST = ["Alice", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas",
         "Keiko", "Liam", "Maya", "Olga", "Pedro", "Rosa"]
LAST = ["Abbott", "Baker", "Castillo", "Dunn", "Ellis", "Fischer", "Garcia", "Hale", "Novak",
        "Okafor", "Price", "Reyes", "Tanaka", "Weber"]
ATTRIBUTES = ["secret code", "room number", "locker number", "access code", "ticket number",
              "order number", "account number", "serial number"]
TEMPLATES = ["Remember this: the {a} of {e} is {v}.", "For the record, the {a} of {e} is {v}.",
             "Important: the {a} for {e} is {v}."]


def make_facts(n, seed=2024):
    rng = random.Random(seed)
    facts, used = [], set()
    while len(facts) < n:
        entity = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        if entity in used:  # one fact per person
            continue
        used.add(entity)
        attribute = rng.choice(ATTRIBUTES)
        value = str(rng.randrange(1000, 91000))
        text = TEMPLATES[len(facts) % len(TEMPLATES)].format(a=attribute, e=entity, v=value)
        facts.append({"entity": entity, "attribute": attribute, "value": value, "text": text,
                      "cue": f"\nQuestion: What is the {attribute} of {entity}?\nAnswer:"})
    return facts


def filler(root):
    files = []
    for d in ("docs", "src"):
        for base, _, names in os.walk(os.path.join(root, d)):
            files += [os.path.join(base, f) for f in names]
    files = sorted(files) + [os.path.join(root, "README.md")]
    parts = []
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            parts.append(fh.read())
    return "\n\n".join(parts)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"memory_e2e_stream: {' '.join(cmd[:3])} ... failed ({r.returncode}): "
                 f"{r.stderr.strip()[-500:]}")
    return r


def chars_per_token(channel, model, sample):
    ids = json.loads(run([channel, "tokenize", "-m", model, "--no-bos", sample]).stdout)
    return len(sample) / max(1, len(ids))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--channel", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True, help="a directory for the text and the store")
    ap.add_argument("--tokens", type=int, default=120000, help="about this many tokens streamed")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--facts", type=int, default=24)
    ap.add_argument("--answer", action="store_true", help="also ask the model the questions")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(args.out, exist_ok=True)
    text_path = os.path.join(args.out, "stream.txt")
    store = os.path.join(args.out, "stream.episodic.mem")
    if os.path.exists(store):
        os.remove(store)

    # The text: a prefix of the filler sized to about --tokens, with the facts as paragraphs
    # at paragraph boundaries spread over its first 75 % (the last fact is evicted long
    # before the end).
    body = filler(root)
    cpt = chars_per_token(args.channel, args.model, body[:60000])
    body = body[:int(args.tokens * cpt)]
    facts = make_facts(args.facts)
    pieces, last = [], 0
    for i, f in enumerate(facts):
        at = body.find("\n\n", max(last, int(len(body) * 0.75 * (i + 0.5) / len(facts))))
        if at < 0:
            sys.exit("memory_e2e_stream: the filler text has too few paragraphs")
        pieces += [body[last:at], "\n\n" + f["text"] + "\n\n"]
        last = at + 2
    pieces.append(body[last:])
    with open(text_path, "w", encoding="utf-8") as fh:
        fh.write("".join(pieces))

    geometry = ["--slots", "4096", "--recall-slots", "192"]
    t0 = time.time()
    r = run([args.channel, "stream", "-m", args.model, "-f", text_path, "--turns", "--memory",
             store, "-t", str(args.threads), "--stats-every", "1000000000"] + geometry)
    seconds = time.time() - t0
    m = re.search(r"streamed (\d+) tokens in [0-9.]+ s \(([0-9.]+) tok/s\)", r.stderr)
    if not m:
        sys.exit(f"memory_e2e_stream: no stream summary in: {r.stderr[-500:]}")
    streamed, tok_s = int(m.group(1)), float(m.group(2))
    run([args.channel, "mem", "verify", store])
    episodes = [json.loads(l) for l in run([args.channel, "mem", "ls", "--json", store])
                .stdout.splitlines()]
    print(f"{os.path.basename(args.model)}: streamed {streamed} tokens in {seconds:.0f} s "
          f"({tok_s:.0f} tok/s, window wrapped {streamed / 4096:.1f} times), "
          f"{len(episodes)} episodes stored", flush=True)

    def holds(ep, f):
        return f"of {f['entity']} is {f['value']}" in ep["summary"] or \
               f"for {f['entity']} is {f['value']}" in ep["summary"]

    totals = {"at1": 0, "at3": 0, "said_none": 0, "said_top1": 0, "said_top3": 0}
    print(f"{'fact':28} {'value':>6} {'ep':>6} {'rank':>4}" +
          ("  no recall   top-1       top-3" if args.answer else ""))
    for f in facts:
        right = {e["id"] for e in episodes if holds(e, f)}
        if not right:
            sys.exit(f"memory_e2e_stream: no stored episode holds the fact about {f['entity']}")
        hits = [json.loads(l) for l in run(
            [args.channel, "mem", "query", "-m", args.model, "-t", str(args.threads), "--json",
             "-k", "3", store, "--text", f["cue"]]).stdout.splitlines()]
        rank = next((h["rank"] for h in hits if h["id"] in right), 0)
        totals["at1"] += rank == 1
        totals["at3"] += 1 <= rank <= 3
        line = f"{f['entity'] + ' ' + f['attribute'][:8]:28} {f['value']:>6} " \
               f"{min(right):>6} {rank:>4}"
        if args.answer:
            for key, k in (("said_none", 0), ("said_top1", 1), ("said_top3", 3)):
                out = run([args.channel, "run", "-m", args.model, "--memory", store,
                           "--recall-only", "--recall-k", str(k), "-p", f["cue"], "-n", "8",
                           "--temp", "0", "--no-echo", "-t", str(args.threads)] + geometry)
                answer = out.stdout.strip().split("\n")[0]
                totals[key] += f["value"] in answer
                line += f"  {answer[:10]!r:10}"
        print(line, flush=True)
    n = len(facts)
    result = {"model": os.path.basename(args.model), "tokens": streamed, "stream_tok_s": tok_s,
              "episodes": len(episodes), "facts": n, "recall_at_1": totals["at1"] / n,
              "recall_at_3": totals["at3"] / n}
    if args.answer:
        for key in ("said_none", "said_top1", "said_top3"):
            result[key] = totals[key] / n
    print(json.dumps(result))


if __name__ == "__main__":
    main()
