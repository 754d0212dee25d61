#!/usr/bin/env python3
"""Evaluate a Channel GGUF with the PyTorch reference (CPU or GPU).

  python3 train/eval_gguf.py MODEL.gguf --text FILE [--ctx 512] [--all]
  python3 train/eval_gguf.py MODEL.gguf --generate "The city" [-n 60] [--temp 0]

--text: perplexity with llama-perplexity's protocol (the file tokenized as one
string with <bos> first, chunks of --ctx tokens, first token of each chunk set
to <bos>, second half of each chunk scored).  --all also prints the perplexity
over every token of the file in one window (when it fits in the context).
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_gguf  # noqa: E402
from model import Model  # noqa: E402
from train import generate, ppl_llama_protocol  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--text")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--chunks", type=int, default=0, help="only the first N chunks (llama-perplexity --chunks)")
    ap.add_argument("--generate")
    ap.add_argument("-n", type=int, default=60)
    ap.add_argument("--temp", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "tokenizer", "spm.model"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    if not os.path.isfile(args.model):
        sys.exit("eval_gguf: no model at " + args.model)
    torch.set_num_threads(1)
    cfg, sd = export_gguf.load(args.model)
    m = Model(cfg)
    m.load_state_dict(sd)
    m.to(args.device).eval()
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
    if args.text:
        text = open(args.text, encoding="utf-8").read()
        ids = [2] + sp.encode(text)
        p, nch, n = ppl_llama_protocol(m, ids, args.ctx, args.device, max_chunks=args.chunks, bs=1)
        print("tokens %d  n_ctx %d  chunks %d  scored %d  ppl %.4f" % (len(ids), args.ctx, nch, n, p))
        if args.all and len(ids) <= cfg.ctx:
            with torch.no_grad():
                x = torch.tensor([ids], device=args.device)
                lp = F.log_softmax(m(x)[0, :-1].float(), -1)
                nll = -lp.gather(-1, x[0, 1:, None]).mean().item()
            print("whole-file ppl (all %d predicted tokens): %.4f" % (len(ids) - 1, math.exp(nll)))
    if args.generate is not None:
        print(generate(m, sp, args.generate, args.n, args.device, temp=args.temp, seed=args.seed))


if __name__ == "__main__":
    main()
