#!/usr/bin/env python3
"""Tokenize the memory-task fact banks (memory_facts.py) for finetune_memory.py.

Usage: python3 train/make_memory_bank.py [--data train/data] [--n-train 60000] [--n-eval 2000]

Writes DATA/tokens/memory_{train,eval}.npz: for each fact the ids of its statement (as it is
written into an episode: on a line of its own or inside a paragraph), of its question (in a
scaffold, ending where the answer starts) and of its answer (" VALUE."), plus an attribute id.
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from memory_facts import ATTRS, FactMaker  # noqa: E402


def make_bank(sp, split, n, seed):
    fm = FactMaker(split, seed)
    attrs = sorted(ATTRS)
    parts = {"stmt": [], "q": [], "ans": []}
    attr = []
    for _ in range(n):
        f = fm.make()
        stmt = ("\n" + f["statement"] + "\n") if fm.rng.random() < 0.5 else (" " + f["statement"] + " ")
        parts["stmt"].append(sp.encode(stmt))
        parts["q"].append(sp.encode("\n" + f["question"]))
        parts["ans"].append(sp.encode(f["answer"]))
        attr.append(attrs.index(f["attribute"]))
    out = {"attr": np.asarray(attr, np.int16)}
    for k, lists in parts.items():
        off = np.zeros(len(lists) + 1, dtype=np.int64)
        off[1:] = np.cumsum([len(x) for x in lists])
        out[k] = np.concatenate([np.asarray(x, dtype=np.int16) for x in lists])
        out[k + "_off"] = off
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--n-train", type=int, default=60000)
    ap.add_argument("--n-eval", type=int, default=2000)
    args = ap.parse_args()
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(HERE, "tokenizer", "spm.model"))
    out = os.path.join(args.data, "tokens")
    os.makedirs(out, exist_ok=True)
    np.savez_compressed(os.path.join(out, "memory_train.npz"), **make_bank(sp, "train", args.n_train, 1234))
    np.savez_compressed(os.path.join(out, "memory_eval.npz"), **make_bank(sp, "eval", args.n_eval, 987654))
    print("wrote", out)


if __name__ == "__main__":
    main()
