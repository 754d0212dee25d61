#!/usr/bin/env python3
"""Reference numbers for the engine, from the PyTorch model on a GGUF's weights.

  python3 train/make_goldens.py models/channel-default.gguf models/channel-bounded.gguf \
      --ids train/data/tokens/valid_ppl.bin --out train/results/goldens.json

For each model: the running perplexity (llama-perplexity protocol) over the
first --chunks chunks of --ctx tokens of the held-out ids, and the top-10
logits at the last position of the first --prefix ids (with <bos> first).
Weights are the GGUF's (Q8_0 dequantized), arithmetic is f32 with exact GELU-tanh,
so an engine that quantizes activations will differ by ~1e-2 in the logits.
"""
import argparse
import json
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--ids", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--prefix", type=int, default=300)
    args = ap.parse_args()
    torch.set_num_threads(1)
    ids = np.fromfile(args.ids, dtype=np.uint16).astype(np.int64)
    out = {"protocol": "llama-perplexity: chunks of ctx ids from the held-out file (tokenized with <bos> first), "
                       "first id of each chunk set to <bos> (2), score positions ctx/2..ctx-2",
           "ctx": args.ctx, "chunks": args.chunks, "prefix_ids": [int(x) for x in ids[:args.prefix]], "models": {}}
    for path in args.models:
        cfg, sd = export_gguf.load(path)
        m = Model(cfg)
        m.load_state_dict(sd)
        m.eval()
        first = args.ctx // 2
        nll, cnt, running = 0.0, 0, []
        with torch.no_grad():
            for c in range(args.chunks):
                r = ids[c * args.ctx:(c + 1) * args.ctx].copy()
                r[0] = 2
                x = torch.from_numpy(r)[None]
                lp = F.log_softmax(m(x)[0, first:args.ctx - 1].float(), -1)
                t = x[0, first + 1:]
                nll -= lp.gather(-1, t[:, None]).sum().item()
                cnt += t.numel()
                running.append(round(math.exp(nll / cnt), 5))
            x = torch.from_numpy(ids[:args.prefix].copy())[None]
            lg = m(x)[0, -1].float()
            top = torch.topk(lg, 10)
        out["models"][os.path.basename(path)] = {
            "arch": cfg.arch, "running_ppl": running,
            "last_top10": [{"id": int(i), "logit": round(float(v), 5)} for v, i in zip(top.values, top.indices)]}
        print(os.path.basename(path), running, int(top.indices[0]))
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
