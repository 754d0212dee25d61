#!/usr/bin/env python3
"""Train Channel's SentencePiece BPE tokenizer on the corpus.

Usage: python3 train/train_tokenizer.py [--corpus train/data/corpus] [--vocab 8192]

Writes train/tokenizer/spm.model (+ .vocab).  Id layout, which the GGUF
export keeps as is:  0 <pad>, 1 <eos>, 2 <bos>, 3 <unk>, 4..259 the byte
tokens <0x00>..<0xFF>, then the BPE pieces in merge order.

The options keep SentencePiece and llama.cpp's "llama" (SPM) tokenizer in
agreement: BPE (llama.cpp merges by score the same way), identity
normalisation, no whitespace collapsing, no dummy prefix (GGUF
add_space_prefix = false), byte fallback for anything not in the vocabulary.
Needs Debian's python3-sentencepiece.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(HERE, "data", "corpus"))
    ap.add_argument("--out", default=os.path.join(HERE, "tokenizer"))
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--sample-every", type=int, default=3,
                    help="train on every N-th non-empty line (deterministic sample)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    try:
        import sentencepiece as spm
    except ImportError:
        sys.exit("train_tokenizer: python3-sentencepiece is missing (apt-get install python3-sentencepiece)")
    src = os.path.join(args.corpus, "train.txt")
    if not os.path.isfile(src) or os.path.getsize(src) == 0:
        sys.exit("train_tokenizer: corpus %s is missing or empty; run train/build_corpus.py first" % src)
    os.makedirs(args.out, exist_ok=True)
    sample = os.path.join(args.out, "sample.txt")
    n = kept = 0
    with open(src, encoding="utf-8") as f, open(sample, "w", encoding="utf-8") as g:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line == "\x1e":
                continue
            n += 1
            if n % args.sample_every == 0:
                g.write(line[:4000] + "\n")
                kept += 1
    print("tokenizer sample: %d of %d lines" % (kept, n), flush=True)
    spm.SentencePieceTrainer.train(
        input=sample,
        model_prefix=os.path.join(args.out, "spm"),
        model_type="bpe",
        vocab_size=args.vocab,
        character_coverage=0.9995,
        byte_fallback=True,
        pad_id=0, eos_id=1, bos_id=2, unk_id=3,
        pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>",
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=False,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        max_sentence_length=4096,
        input_sentence_size=0,
        shuffle_input_sentence=False,
        num_threads=args.threads,
        minloglevel=1,
    )
    os.remove(sample)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.out, "spm.model"))
    assert sp.piece_to_id("<0x00>") == 4 and sp.piece_to_id("<0xFF>") == 259, "unexpected byte-token layout"
    print("vocab", sp.get_piece_size(), "example:", sp.encode("Hello world, this is Channel.", out_type=str))


if __name__ == "__main__":
    main()
