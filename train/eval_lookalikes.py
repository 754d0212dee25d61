#!/usr/bin/env python3
"""Teacher-forced answers with a look-alike recalled beside the fact: a CPU-sized proxy for the
end-to-end benchmark's failure mode (bench/memory_recall_e2e.py), to compare memory models
before spending a 10^5-token stream on each.

  /usr/bin/python3 train/eval_lookalikes.py MODEL.gguf [MODEL2.gguf ...] [--facts 60] [--seed 2026]

For each of the benchmark's facts (its own templates and names, bench/memory_recall_e2e.py),
tier 3 holds the fact's sentence and the sentence of another planted fact whose entity shares
a first name or surname with it (the hardest neighbour the recall places second), in random
order, each as the engine stores a sentence span; then --window tokens of held-out text, the
benchmark's question and its answer. Reports exact-match answers with the fact alone and with
the look-alike beside it.

--engine lays tier 3 out as the engine does (train/engine_recall.py): each episode's K/V are
computed after up to ~500 tokens of other held-out text, as a stream stores them, and the
tier-3 positions of the row hold the text before the window. That is the harder and truer
test: the end-to-end benchmark's misses are episodes the model reads when they are encoded
alone and misreads when they come from the stream.
"""
import argparse
import importlib.util
import os
import random
import sys

import numpy as np
import sentencepiece as spm
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_gguf  # noqa: E402
from engine_recall import encode_in_context, place  # noqa: E402
from model import Model  # noqa: E402

BOS = 2


def bench_facts(n, seed):
    path = os.path.join(HERE, "..", "bench", "memory_recall_e2e.py")
    spec = importlib.util.spec_from_file_location("memory_recall_e2e", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make_facts(n, seed)


def lookalike(facts, i, rng):
    first, last = facts[i]["entity"].split()
    near = [j for j, f in enumerate(facts) if j != i and
            (f["entity"].split()[0] == first or f["entity"].split()[1] == last)]
    return rng.choice(near) if near else rng.choice([j for j in range(len(facts)) if j != i])


@torch.no_grad()
def evaluate(path, facts, sp, window_ids, window, seed, engine=False):
    cfg, sd = export_gguf.load(path)
    model = Model(cfg)
    model.load_state_dict(sd, strict=False)
    model.eval()
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    ok = {"alone": 0, "lookalike": 0}
    for i, f in enumerate(facts):
        j = lookalike(facts, i, rng)
        ep = lambda k: sp.encode(" " + facts[k]["text"]) + sp.encode("\n\n")  # noqa: E731
        s = rng.randrange(600, len(window_ids) - window - 1)
        body = [int(t) for t in window_ids[s:s + window]]
        q = sp.encode("\n" + f["question"])
        a = sp.encode(" " + f["value"] + ".")
        for name, eps in (("alone", [ep(i)]), ("lookalike", [ep(i), ep(j)])):
            if name == "lookalike" and rng.random() < 0.5:
                eps = eps[::-1]
            mem = None
            if engine:
                R = 1 + sum(len(e) for e in eps)
                row = [BOS] + [int(t) for t in window_ids[s - R + 1:s]] + body + q + a
                enc = encode_in_context(model, [np.array(e) for e in eps], window_ids, nprng, "cpu",
                                        src_len=1024, per_row=2)
                st, spans = 1, []
                for k, e in enumerate(eps):
                    spans.append((st, len(e), k))
                    st += len(e)
                mem = place(model, [spans], enc, 1, len(row), "cpu")
            else:
                row = [BOS] + sum(eps, []) + body + q + a
            x = torch.tensor([row])
            pred = model(x, mem=mem)[0].argmax(-1).numpy()
            pa, la = len(row) - len(a), len(a)
            ok[name] += int(np.array_equal(pred[pa - 1:pa - 1 + la - 1], np.array(row[pa:pa + la - 1])))
    return {k: v / len(facts) for k, v in ok.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--facts", type=int, default=60)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--window", type=int, default=1024)
    ap.add_argument("--ids", default=os.path.join(HERE, "..", "tests", "data", "bounded_heldout_32x1024.u16"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--engine", action="store_true", help="tier 3 encoded in context, as the engine stores it")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(HERE, "tokenizer", "spm.model"))
    facts = bench_facts(args.facts, args.seed)
    ids = np.fromfile(args.ids, dtype=np.uint16)
    for m in args.models:
        r = evaluate(m, facts, sp, ids, args.window, args.seed, args.engine)
        print(f"{os.path.basename(m)}: fact alone {r['alone']:.3f}, with a look-alike {r['lookalike']:.3f}", flush=True)


if __name__ == "__main__":
    main()
