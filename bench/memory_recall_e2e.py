#!/usr/bin/env python3
"""Memory at scale, through the command line only (issue 12, point 4).

1. Plants N facts of varied forms (codes, numbers, names, places, dates; several sentence
   templates) as sentences inside the paragraphs of >= 10^6 tokens of filler text that does not
   come from this repository (by default the CMake reference and GNU manuals installed on any
   Debian machine that builds Channel), spread over the first 90 % of the text.
2. Streams it all through ONE `channel stream -f TEXT --turns --memory STORE --session S` run
   (automatic recall on, as always with --memory): the 4096-slot window wraps hundreds of
   times and every evicted span becomes an episode. RSS and tok/s come from its JSON lines.
3. Asks every fact in words that differ from how it was stated, each as a new turn of that
   session (a fresh copy of S each time), with `channel run --session COPY --memory STORE
   --recall-only`: the engine's automatic recall at the end of the question picks the
   episodes, no id is passed by hand. Without --memory the same question is the baseline.
4. Reports, per retrieval method: recall@1 and recall@3 of the episode holding the fact (the
   ids the automatic recall ranked, against the episode whose text holds the fact), answer
   accuracy (the value appears in the greedy reply), the time of each recall, and accuracy
   without memory.

Usage:
  bench/memory_recall_e2e.py --channel build/channel --out /tmp/mem-e2e \
      [--model models/channel-default.gguf] [--tokens 1000000] [--facts 120] \
      [--methods auto,centroid,keys,proj,proj@0] [--threads 2] [--jobs 1] [--filler PATH ...]
(METHOD@W asks with --recall-lexical W: proj@0 is the model's vectors alone.)
Prints a table and a final JSON line. It takes about half an hour at 10^6 tokens on 2 cores:
it is a benchmark, not a test (tests/unit/memory_retrieval_test.cpp is the CI-sized check).
"""
import argparse
import glob
import gzip
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

# ---------------------------------------------------------------- facts (bench's own forms)
PEOPLE_FIRST = ["Ottilie", "Kwame", "Ingrid", "Yusuf", "Marisol", "Tadeusz", "Wilhelmina",
                "Obinna", "Svetlana", "Leopold", "Anneliese", "Bartholomew", "Cordelia", "Dagny",
                "Evander", "Fiorella", "Gwendolyn", "Henrik", "Isadora", "Jarrah", "Kalinda",
                "Lysander", "Magnus", "Nerissa", "Orlando", "Persephone", "Ragnar", "Seraphina",
                "Thaddeus", "Ulla", "Valentina", "Wolfgang"]
PEOPLE_LAST = ["Vasquez", "Sato", "Moreau", "Brennan", "Achebe", "Lindgren", "Castellano",
               "Hargreaves", "Nkemelu", "Ostrowski", "Pellegrini", "Quiroga", "Rasmussen",
               "Szabo", "Trevelyan", "Umarov", "Valkonen", "Whitcombe", "Yoshida", "Zamora",
               "Abernathy", "Bergstrom", "Cavendish", "Drummond"]
CITIES = ["Reykjavik", "Marrakesh", "Valparaiso", "Trondheim", "Ljubljana", "Cartagena",
          "Zanzibar", "Winnipeg", "Adelaide", "Innsbruck", "Montevideo", "Thessaloniki"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]

# (attribute as stated, attribute as asked, value kind)
ATTRIBUTES = [
    ("badge number", "ID badge", "num"), ("parking space", "parking spot", "num"),
    ("pin code", "PIN", "num"), ("cabin number", "cabin", "num"),
    ("locker combination", "locker code", "num"), ("desk extension", "phone extension", "num"),
    ("access token", "access code", "code"), ("booking reference", "reservation code", "code"),
    ("vehicle registration", "plate number", "code"), ("birthday", "date of birth", "date"),
    ("interview date", "interview day", "date"), ("hometown", "home city", "city"),
    ("next posting", "next assignment city", "city"), ("line manager", "boss", "name"),
    ("dentist", "dental surgeon", "name")]
STATED = [
    "Note that the {a} of {e} is {v}.",
    "Log entry: the {a} for {e} was set to {v}.",
    "{e} told us that the {a} is {v}.",
    "As it turns out, {e} has {v} as {pos} {a}.",
    "The records list {v} as the {a} of {e}.",
    "Yesterday {e} changed the {a} to {v}.",
]
ASKED = [
    "What {a} does {e} have?",
    "Which {a} belongs to {e}?",
    "What was the {a} of {e} again?",
    "Do you know {e}'s {a}?",
]


def value(kind, rng):
    if kind == "num":
        return str(rng.randrange(1000, 99999))
    if kind == "code":
        return "".join(rng.choice("BCDFGHKMNPRTVWXZ") for _ in range(2)) + str(rng.randrange(100, 9999))
    if kind == "date":
        return f"{rng.choice(MONTHS)} {rng.randint(2, 27)}"
    if kind == "city":
        return rng.choice(CITIES)
    return f"{rng.choice(PEOPLE_FIRST)} {rng.choice(PEOPLE_LAST)}"


def make_facts(n, seed):
    rng = random.Random(seed)
    facts, used = [], set()
    while len(facts) < n:
        e = f"{rng.choice(PEOPLE_FIRST)} {rng.choice(PEOPLE_LAST)}"
        if e in used:
            continue
        used.add(e)
        a_said, a_asked, kind = ATTRIBUTES[len(facts) % len(ATTRIBUTES)]
        v = value(kind, rng)
        text = STATED[len(facts) % len(STATED)].format(a=a_said, e=e, v=v, pos="the")
        q = ASKED[len(facts) % len(ASKED)].format(a=a_asked, e=e)
        facts.append(dict(entity=e, attribute=a_said, value=v, text=text,
                          question=f"Question: {q}\nAnswer:"))
    return facts


# ---------------------------------------------------------------- filler
DEFAULT_FILLER = ["/usr/share/cmake-*/Help/**/*.rst", "/usr/share/info/coreutils.info*",
                  "/usr/share/info/diffutils.info*", "/usr/share/info/find.info*",
                  "/usr/share/info/gettext.info*", "/usr/share/info/gnupg.info*",
                  "/usr/share/info/tar.info*", "/usr/share/info/sed.info*",
                  "/usr/share/info/grep.info*", "/usr/share/info/gzip.info*"]


def read_any(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8", errors="replace") as f:
        return f.read()


def filler_paragraphs(patterns):
    files = []
    for p in patterns:
        files += sorted(glob.glob(p, recursive=True)) if any(c in p for c in "*?[") else [p]
    paras = []
    for f in files:
        if not os.path.isfile(f):
            continue
        text = read_any(f).replace("\x1f", "\n").replace("\r", "")
        for para in re.split(r"\n\s*\n", text):
            para = para.strip()
            if len(para) >= 40:
                paras.append(para)
    return paras


# ---------------------------------------------------------------- running channel
def run(cmd, timeout=None, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        sys.exit(f"memory_recall_e2e: {' '.join(cmd[:4])} ... failed ({r.returncode}): "
                 f"{r.stderr.strip()[-600:]}")
    return r


def count_tokens(channel, margs, text):
    ids = json.loads(run([channel, "tokenize", *margs, "--no-bos", text]).stdout)
    return len(ids)


RECALL_LINE = re.compile(r"recall \((\w+)\) at clock \d+:(?: recalled:)?(.*?) \(query ([\d.]+) ms, "
                         r"tier 3 ([\d.]+) ms")


def recall_events(stderr):
    """The automatic recalls `channel run` reports on stderr ("channel: memory F: turn recall
    (proj) at clock N: recalled: ID (SCORE) ... (query Q ms, tier 3 R ms)"): a list of dicts
    with the hits ranked by score, and the query and tier-3 times."""
    out = []
    for line in stderr.splitlines():
        m = RECALL_LINE.search(line)
        if not m:
            continue
        hits = [(int(i), float(sc)) for i, sc in re.findall(r"(\d+) \(([-\d.eE+]+)\)", m.group(2))]
        hits.sort(key=lambda h: -h[1])
        out.append(dict(method=m.group(1), ranked=[dict(id=i, score=sc) for i, sc in hits],
                        query_ms=float(m.group(3)), tier3_ms=float(m.group(4))))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--channel", required=True)
    ap.add_argument("--model", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", type=int, default=1_000_000)
    ap.add_argument("--facts", type=int, default=120)
    ap.add_argument("--methods", default="auto")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--recall-k", type=int, default=3)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--filler", nargs="*", default=DEFAULT_FILLER)
    ap.add_argument("--reuse", action="store_true", help="keep an existing stream in --out")
    ap.add_argument("--jobs", type=int, default=1, help="questions asked at once (processes)")
    ap.add_argument("--min-ratio", type=float, default=None,
                    help="--recall-min-ratio for the questions (the score gate; default: the CLI's)")
    ap.add_argument("--recall-copy", type=float, default=None,
                    help="--recall-copy for the questions (recall copy's bonus; 0: off; default: "
                         "the CLI's)")
    args = ap.parse_args()
    ch = os.path.abspath(args.channel)
    model = args.model
    margs = ["-m", model] if model else []
    os.makedirs(args.out, exist_ok=True)
    text_path = os.path.join(args.out, "stream.txt")
    store = os.path.join(args.out, "stream.episodic.mem")
    session = os.path.join(args.out, "stream.session")
    facts = make_facts(args.facts, args.seed)
    report = dict(tokens_goal=args.tokens, facts=len(facts))

    if not (args.reuse and os.path.exists(session) and os.path.exists(store)):
        paras = filler_paragraphs(args.filler)
        if not paras:
            sys.exit("memory_recall_e2e: no filler text found (give --filler PATH ...)")
        rng = random.Random(args.seed)
        rng.shuffle(paras)
        sample = "\n\n".join(paras[:100])
        cpt = len(sample) / max(1, count_tokens(ch, margs, sample))
        need_chars = int(args.tokens * cpt * 1.02)
        body, n = [], 0
        i = 0
        while n < need_chars:
            p = paras[i % len(paras)]
            body.append(p)
            n += len(p) + 2
            i += 1
        if i > len(paras):
            print(f"note: the filler ({len(paras)} paragraphs) was used {i / len(paras):.1f} times",
                  file=sys.stderr)
        # plant facts inside paragraphs spread over the first 90 % of the text
        where = sorted(rng.sample(range(len(body) // 20, len(body) * 9 // 10), len(facts)))
        for f, w in zip(facts, where):
            sents = re.split(r"(?<=[.!?])\s+", body[w])
            k = rng.randint(0, len(sents))
            sents.insert(k, f["text"])
            body[w] = " ".join(sents)
            f["paragraph"] = w
        with open(text_path, "w", encoding="utf-8") as fh:
            fh.write("\n\n".join(body) + "\n")
        for p in (store, session):
            if os.path.exists(p):
                os.remove(p)
        t0 = time.time()
        # room for every episode of the stream (about one per 40-64 tokens), so that nothing
        # planted is overwritten: this measures recall, not the store's replacement policy
        capacity = max(4096, args.tokens // 24)
        cmd = [ch, "stream", *margs, "-f", text_path, "--turns", "--memory", store, "--session",
               session, "-t", str(args.threads), "--stats-every", "4096",
               "--memory-capacity", str(capacity)]
        print("$", " ".join(cmd), file=sys.stderr)
        r = run(cmd)
        wall = time.time() - t0
        lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
        stats = [l for l in lines if "rss_bytes" in l]
        rss = [l["rss_bytes"] for l in stats]
        toks = stats[-1].get("clock", 0) if stats else 0
        warm = rss[len(rss) // 10:] if rss else []
        report["stream"] = dict(tokens=toks, seconds=round(wall, 1), tok_per_s=round(toks / wall, 1),
                                rss_mib_first=round(rss[0] / 2**20, 1) if rss else None,
                                rss_mib_after_warmup_min=round(min(warm) / 2**20, 1) if warm else None,
                                rss_mib_after_warmup_max=round(max(warm) / 2**20, 1) if warm else None,
                                recall_events=sum(1 for l in lines if l.get("event") == "recall"))
        with open(os.path.join(args.out, "facts.json"), "w") as fh:
            json.dump(facts, fh, indent=1)
        print(json.dumps(report["stream"]), file=sys.stderr)
    else:
        with open(os.path.join(args.out, "facts.json")) as fh:
            facts = json.load(fh)

    # which episode holds each fact: the one whose stored text contains the value and the name
    episodes = [json.loads(l) for l in run([ch, "mem", "ls", store, "--json"]).stdout.splitlines()
                if l.startswith("{")]
    for f in facts:
        last = f["entity"].split()[-1]
        f["episodes"] = [e["id"] for e in episodes
                         if f["value"].split()[0] in e.get("summary", "") and last in e.get("summary", "")]
    report["facts_found_in_store"] = sum(1 for f in facts if f["episodes"])

    results = {}
    from concurrent.futures import ThreadPoolExecutor

    def ask(i, f, method):
        work = os.path.join(args.out, f"q{i}.session")
        shutil.copyfile(session, work)
        cmd = [ch, "run", *margs, "--session", work, "-p", "\n" + f["question"], "-n", "10",
               "--temp", "0", "--no-echo", "-t", str(args.threads)]
        if method != "none":
            name, _, lex = method.partition("@")   # METHOD@W: lexical weight W
            cmd += ["--memory", store, "--recall-only", "--recall-k", str(args.recall_k),
                    "--recall-method", name]
            if lex:
                cmd += ["--recall-lexical", lex]
            if args.min_ratio is not None:
                cmd += ["--recall-min-ratio", str(args.min_ratio)]
            if args.recall_copy is not None:
                cmd += ["--recall-copy", str(args.recall_copy)]
        r = run(cmd)
        os.remove(work)
        return r

    for method in ["none"] + args.methods.split(","):
        ok = r1 = r3 = 0
        times = []
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            answers = list(pool.map(lambda a: ask(a[0], a[1], method), enumerate(facts)))
        for f, r in zip(facts, answers):
            reply = r.stdout
            ok += int(f["value"].lower() in reply.lower())
            if method != "none":
                evs = recall_events(r.stderr)
                ranked = evs[-1]["ranked"] if evs else []
                ids = [x["id"] for x in ranked]
                times += [e["query_ms"] + e["tier3_ms"] for e in evs]
                r1 += int(bool(ids) and ids[0] in f["episodes"])
                r3 += int(any(i in f["episodes"] for i in ids[:3]))
            f.setdefault("replies", {})[method] = reply.strip()[:80]
        n = len(facts)
        results[method] = dict(answer_accuracy=ok / n)
        if method != "none":
            results[method].update(recall_at_1=r1 / n, recall_at_3=r3 / n,
                                   recall_ms_median=round(statistics.median(times), 2) if times else None,
                                   recall_ms_max=round(max(times), 2) if times else None)
        print(method, json.dumps(results[method]), file=sys.stderr, flush=True)
    report["methods"] = results
    with open(os.path.join(args.out, "facts.json"), "w") as fh:
        json.dump(facts, fh, indent=1)
    print("| method | recall@1 | recall@3 | answer accuracy | recall ms (median / max) |")
    print("|---|---|---|---|---|")
    for m, v in results.items():
        print(f"| {m} | {v.get('recall_at_1', '-')} | {v.get('recall_at_3', '-')} | "
              f"{v['answer_accuracy']:.3f} | {v.get('recall_ms_median', '-')} / {v.get('recall_ms_max', '-')} |")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
