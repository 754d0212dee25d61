#!/usr/bin/env python3
"""Tokenize the corpus and build the synthetic recall-task banks.

Usage: python3 train/tokenize_corpus.py [--data train/data]

Reads  DATA/corpus/{train,valid}.txt and train/tokenizer/spm.model.
Writes DATA/tokens/:
  train.bin, valid.bin   uint16 ids; every document is [<bos>] ids [<eos>]
  valid_plain.txt        the held-out documents joined by blank lines: the text
                         `llama-perplexity -f` / `channel perplexity` read
  valid_ppl.bin          uint16 ids of valid_plain.txt as llama.cpp tokenizes it
                         (one <bos>, then the whole text)
  recall_{train,eval}.npz  recall-task examples (see make_recall_bank)
  meta.json
"""
import argparse
import json
import multiprocessing as mp
import os
import random
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RS_SEP = "\n\x1e\n"
BOS, EOS = 2, 1

_sp = None


def _init(model):
    global _sp
    import sentencepiece as spm
    _sp = spm.SentencePieceProcessor(model_file=model)


def _enc(doc):
    return _sp.encode(doc)


def read_docs(path):
    with open(path, encoding="utf-8") as f:
        t = f.read()
    return [d for d in t.split(RS_SEP) if d.strip()]


# ---------------------------------------------------------------- recall task
FIRST = ["Alice", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas",
         "Keiko", "Liam", "Maya", "Nikolai", "Olga", "Pedro", "Quinn", "Rosa", "Samir", "Tara",
         "Ulrich", "Vera", "Walter", "Xenia", "Yusuf", "Zoe", "Arthur", "Beatrice", "Carlos", "Dora"]
LAST = ["Abbott", "Baker", "Castillo", "Dunn", "Ellis", "Fischer", "Garcia", "Hale", "Iverson",
        "Jensen", "Kowalski", "Lambert", "Moreau", "Novak", "Okafor", "Price", "Quint", "Reyes",
        "Schmidt", "Tanaka", "Underwood", "Vance", "Weber", "Young", "Zimmer"]
ADJ = ["red", "blue", "green", "silver", "old", "north", "small", "quiet", "east", "wooden",
       "golden", "broken", "upper", "hidden", "western", "narrow"]
NOUN = ["door", "garden", "tower", "warehouse", "library", "cabinet", "harbor", "bridge",
        "station", "workshop", "vault", "office", "cellar", "lighthouse", "barn", "gallery"]
ATTR = ["secret code", "room number", "locker number", "access code", "ticket number",
        "order number", "PIN", "account number", "serial number", "combination"]
FACT_T = [
    "Remember this: the {a} of {e} is {v}.",
    "For the record, the {a} of {e} is {v}.",
    "Note: {e} has {a} {v}.",
    "Important: the {a} for {e} is {v}.",
]
QUESTION_T = "Question: What is the {a} of {e}?\nAnswer:"


def make_example(rng):
    if rng.random() < 0.5:
        e = "%s %s" % (rng.choice(FIRST), rng.choice(LAST))
    else:
        e = "the %s %s" % (rng.choice(ADJ), rng.choice(NOUN))
    a = rng.choice(ATTR)
    nd = rng.randint(3, 5)
    v = str(rng.randrange(10 ** (nd - 1), 10 ** nd))
    fact = "\n" + rng.choice(FACT_T).format(a=a, e=e, v=v) + "\n"
    q = "\n" + QUESTION_T.format(a=a, e=e)
    ans = " " + v
    return fact, q, ans


def make_recall_bank(sp, n, seed):
    """Arrays: fact ids, question ids (ending at 'Answer:'), answer ids, plus
    offsets.  The answer is followed by '.\n' in training (tail ids)."""
    rng = random.Random(seed)
    F, Q, A = [], [], []
    for _ in range(n):
        f, q, a = make_example(rng)
        F.append(sp.encode(f))
        Q.append(sp.encode(q))
        A.append(sp.encode(a))
    tail = sp.encode(".\n")

    def pack(lists):
        off = np.zeros(len(lists) + 1, dtype=np.int64)
        off[1:] = np.cumsum([len(x) for x in lists])
        return np.concatenate([np.asarray(x, dtype=np.int16) for x in lists]), off

    fi, fo = pack(F)
    qi, qo = pack(Q)
    ai, ao = pack(A)
    return dict(fact=fi, fact_off=fo, q=qi, q_off=qo, ans=ai, ans_off=ao, tail=np.asarray(tail, np.int32))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--recall-only", action="store_true", help="only rebuild the recall banks")
    args = ap.parse_args()
    model = os.path.join(HERE, "tokenizer", "spm.model")
    corpus = os.path.join(args.data, "corpus")
    for p in (model, os.path.join(corpus, "train.txt"), os.path.join(corpus, "valid.txt")):
        if not os.path.isfile(p) or os.path.getsize(p) == 0:
            sys.exit("tokenize_corpus: %s is missing or empty (run build_corpus.py and train_tokenizer.py)" % p)
    out = os.path.join(args.data, "tokens")
    os.makedirs(out, exist_ok=True)
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=model)
    meta = {"vocab": sp.get_piece_size()}
    for split in (() if args.recall_only else ("train", "valid")):
        docs = read_docs(os.path.join(corpus, split + ".txt"))
        with mp.Pool(args.procs, initializer=_init, initargs=(model,)) as pool:
            enc = pool.map(_enc, docs, chunksize=64)
        n = sum(len(e) + 2 for e in enc)
        arr = np.empty(n, dtype=np.uint16)
        i = 0
        for e in enc:
            arr[i] = BOS
            arr[i + 1: i + 1 + len(e)] = e
            arr[i + 1 + len(e)] = EOS
            i += len(e) + 2
        arr.tofile(os.path.join(out, split + ".bin"))
        meta[split + "_tokens"] = int(n)
        meta[split + "_docs"] = len(docs)
        print(split, len(docs), "docs", n, "tokens", flush=True)
        if split == "valid":
            plain = "\n\n".join(d.strip("\n") for d in docs) + "\n"
            with open(os.path.join(out, "valid_plain.txt"), "w", encoding="utf-8", newline="\n") as f:
                f.write(plain)
            ids = [BOS] + sp.encode(plain)
            np.asarray(ids, dtype=np.uint16).tofile(os.path.join(out, "valid_ppl.bin"))
            meta["valid_ppl_tokens"] = len(ids)
    np.savez_compressed(os.path.join(out, "recall_train.npz"), **make_recall_bank(sp, 40000, 1234))
    np.savez_compressed(os.path.join(out, "recall_eval.npz"), **make_recall_bank(sp, 1000, 987654))
    if args.recall_only:
        return
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(meta)


if __name__ == "__main__":
    main()
