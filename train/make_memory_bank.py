#!/usr/bin/env python3
"""Tokenize the memory-task fact banks (memory_facts.py) for finetune_memory.py.

Usage: python3 train/make_memory_bank.py [--data train/data] [--n-train 120000] [--n-eval 2000]

Writes DATA/tokens/memory_{train,eval}.npz: for each fact the ids of its statement (as it is
written into an episode: on a line of its own or inside a paragraph), of its question (in a
scaffold, ending where the answer starts) and of its answer (" VALUE."), plus an attribute id, an entity hash and a cluster id (train: facts about one entity and its
look-alikes share a cluster; eval: one fact per cluster).
"""
import argparse
import hashlib
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from memory_facts import ATTRS, EXTRA_ATTRS, FactMaker, TrainFactMaker  # noqa: E402


def _h(s):
    return int.from_bytes(hashlib.sha1(s.encode()).digest()[:7], "little")


def make_bank(sp, split, n, seed, value_first=0.35):
    """The eval split is made exactly as before (FactMaker); the train split in clusters of
    related facts (TrainFactMaker), each fact tagged with its cluster for hard distractors."""
    attrs = sorted(ATTRS) + sorted(EXTRA_ATTRS)
    parts = {"stmt": [], "q": [], "ans": []}
    attr, ent, clu = [], [], []
    if split == "eval":
        fm = FactMaker(split, seed)
        facts = []
        for i in range(n):    # the same draws in the same order as the banks of runs 4-7
            f = fm.make()
            f["nl"] = fm.rng.random() < 0.5
            facts.append((f, i))
    else:
        fm = TrainFactMaker(seed, value_first)
        facts, c = [], 0
        while len(facts) < n:
            for f in fm.cluster():
                f["nl"] = fm.rng.random() < 0.5
                facts.append((f, c))
            c += 1
        facts = facts[:n]
    for f, c in facts:
        stmt = ("\n" + f["statement"] + "\n") if f["nl"] else (" " + f["statement"] + " ")
        parts["stmt"].append(sp.encode(stmt))
        parts["q"].append(sp.encode("\n" + f["question"]))
        parts["ans"].append(sp.encode(f["answer"]))
        attr.append(attrs.index(f["attribute"]))
        ent.append(_h(f["entity"]))
        clu.append(c)
    out = {"attr": np.asarray(attr, np.int16), "ent": np.asarray(ent, np.int64), "clu": np.asarray(clu, np.int32)}
    for k, lists in parts.items():
        off = np.zeros(len(lists) + 1, dtype=np.int64)
        off[1:] = np.cumsum([len(x) for x in lists])
        out[k] = np.concatenate([np.asarray(x, dtype=np.int16) for x in lists])
        out[k + "_off"] = off
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--n-train", type=int, default=120000)
    ap.add_argument("--n-eval", type=int, default=2000)
    ap.add_argument("--value-first", type=float, default=0.35,
                    help="share of composed training statements that state the value before the entity "
                         "(or the entity far from it): the forms a small model reads worst")
    ap.add_argument("--train-name", default="memory_train.npz",
                    help="file name of the training bank (finetune_memory.py --bank)")
    ap.add_argument("--out", default="", help="folder for the .npz files (default DATA/tokens)")
    args = ap.parse_args()
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(HERE, "tokenizer", "spm.model"))
    out = args.out or os.path.join(args.data, "tokens")
    os.makedirs(out, exist_ok=True)
    np.savez_compressed(os.path.join(out, args.train_name), **make_bank(sp, "train", args.n_train, 1234, args.value_first))
    np.savez_compressed(os.path.join(out, "memory_eval.npz"), **make_bank(sp, "eval", args.n_eval, 987654))
    print("wrote", out)


if __name__ == "__main__":
    main()
