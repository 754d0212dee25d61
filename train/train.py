#!/usr/bin/env python3
"""Train a Channel model (gemma3 or bounded) on the tokenized corpus.

Usage:
  python3 train/train.py --preset gemma3  --minutes 6 --out OUTDIR
  python3 train/train.py --preset bounded --minutes 6 --out OUTDIR
  python3 train/train.py --preset tiny-gemma3 --steps 30 --device cpu ...   (smoke test)

Data (from tokenize_corpus.py) is read from --data (default train/data/tokens).
At the end it evaluates the best checkpoint, exports GGUF and writes
OUTDIR/results.json:
  * held-out perplexity with llama-perplexity's protocol on valid_ppl.bin
    (chunks of n_ctx tokens, first token of each chunk replaced by <bos>,
    only the second half of each chunk scored), for the PyTorch weights and
    for the weights read back from the exported GGUF;
  * recall-task accuracy with the fact in context and with it removed;
  * sample generations.
"""
import argparse
import copy
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from model import Config, Model  # noqa: E402
import export_gguf  # noqa: E402

PRESETS = {
    # default model: 12 layers, layers 5 and 11 global (gemma3 pattern 6)
    "gemma3": dict(arch="gemma3", d=384, n_layer=12, n_head=6, n_kv=2, head_dim=64, ffn=1536,
                   window=512, ctx=4096),
    # bounded: same block; layers 5 and 11 global, others swa_sink_v1
    "bounded": dict(arch="bounded", d=384, n_layer=12, n_head=6, n_kv=2, head_dim=64, ffn=1536,
                    window=256, sinks=4, rd=32, rope_base=10000.0, ctx=4096,
                    layer_types=[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1]),
    "tiny-gemma3": dict(arch="gemma3", d=64, n_layer=6, n_head=4, n_kv=2, head_dim=16, ffn=128,
                        window=16, ctx=256),
    "tiny-bounded": dict(arch="bounded", d=64, n_layer=3, n_head=4, n_kv=2, head_dim=16, ffn=128,
                         window=16, sinks=2, rd=8, rope_base=10000.0, ctx=256, layer_types=[0, 1, 0]),
}


def log(*a):
    print("[%s]" % time.strftime("%H:%M:%S"), *a, flush=True)


# ------------------------------------------------------------------ data
class Recall:
    def __init__(self, path):
        z = np.load(path)
        self.f, self.fo = z["fact"], z["fact_off"]
        self.q, self.qo = z["q"], z["q_off"]
        self.a, self.ao = z["ans"], z["ans_off"]
        self.tail = z["tail"]
        self.n = len(self.fo) - 1

    def get(self, i):
        return (self.f[self.fo[i]:self.fo[i + 1]], self.q[self.qo[i]:self.qo[i + 1]],
                self.a[self.ao[i]:self.ao[i + 1]])


def place_recall(row, ex, tail, dist, rng, with_fact=True):
    """Write fact ... question answer tail into row (np int array) in place.

    dist = tokens from the start of the fact to the start of the question.
    Returns (answer_start, answer_len) or None if it does not fit."""
    f, q, a = ex
    L = len(row)
    need = dist + len(q) + len(a) + len(tail)
    if dist < len(f) + 1 or need > L:
        return None
    pf = rng.randint(0, L - need)
    if with_fact:
        row[pf:pf + len(f)] = f
    pq = pf + dist
    row[pq:pq + len(q)] = q
    pa = pq + len(q)
    row[pa:pa + len(a)] = a
    row[pa + len(a):pa + len(a) + len(tail)] = tail
    return pa, len(a)


class Batcher:
    def __init__(self, tokens, T, B, recall, p_recall, dmin, dmax, seed):
        self.tok, self.T, self.B = tokens, T, B
        self.recall, self.p, self.dmin, self.dmax = recall, p_recall, dmin, dmax
        self.rng = random.Random(seed)
        self.nprng = np.random.default_rng(seed)

    def next(self):
        T, B = self.T, self.B
        starts = self.nprng.integers(0, len(self.tok) - T - 1, size=B)
        x = np.stack([self.tok[s:s + T + 1] for s in starts]).astype(np.int64)
        if self.recall is not None:
            for r in range(B):
                if self.rng.random() < self.p:
                    ex = self.recall.get(self.rng.randrange(self.recall.n))
                    dmax = min(self.dmax, T - 40)
                    d = int(math.exp(self.rng.uniform(math.log(self.dmin), math.log(dmax))))
                    place_recall(x[r], ex, self.recall.tail, d, self.rng)
        return torch.from_numpy(x)


# ------------------------------------------------------------------ eval
@torch.no_grad()
def ppl_llama_protocol(model, ids, n_ctx, device, max_chunks=0, bs=8):
    """llama-perplexity's number: chunks of n_ctx, <bos> first, score second half."""
    model.eval()
    n_chunk = len(ids) // n_ctx
    if max_chunks:
        n_chunk = min(n_chunk, max_chunks)
    first = n_ctx // 2
    nll, cnt = 0.0, 0
    for c0 in range(0, n_chunk, bs):
        rows = []
        for c in range(c0, min(n_chunk, c0 + bs)):
            r = np.array(ids[c * n_ctx:(c + 1) * n_ctx], dtype=np.int64)
            r[0] = 2
            rows.append(r)
        x = torch.from_numpy(np.stack(rows)).to(device)
        with autocast(device):
            logits = model(x)
        lp = F.log_softmax(logits[:, first:n_ctx - 1].float(), dim=-1)
        tgt = x[:, first + 1:n_ctx]
        nll -= lp.gather(-1, tgt[..., None]).sum().item()
        cnt += tgt.numel()
    model.train()
    return math.exp(nll / max(cnt, 1)), n_chunk, cnt


@torch.no_grad()
def quick_valid_loss(model, vt, T, device, n=16):
    model.eval()
    rng = np.random.default_rng(0)
    starts = rng.integers(0, len(vt) - T - 1, size=n)
    x = torch.from_numpy(np.stack([vt[s:s + T + 1] for s in starts]).astype(np.int64)).to(device)
    tot = 0.0
    for i in range(0, n, 8):
        xb = x[i:i + 8]
        with autocast(device):
            lg = model(xb[:, :-1])
        tot += F.cross_entropy(lg.float().reshape(-1, lg.shape[-1]), xb[:, 1:].reshape(-1), reduction="sum").item()
    model.train()
    return tot / (n * T)


@torch.no_grad()
def recall_eval(model, vt, recall, T, device, bins, n_per_bin=100, seed=5):
    """Exact-match accuracy of the answer (all answer tokens argmax-correct,
    teacher forced), with the fact present and with it absent."""
    model.eval()
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    res = {}
    for lo, hi in bins:
        hi = min(hi, T - 40)
        if hi <= lo:
            continue
        rows_in, rows_out, spans = [], [], []
        for k in range(n_per_bin):
            ex = recall.get(rng.randrange(recall.n))
            s = nprng.integers(0, len(vt) - T - 1)
            base = vt[s:s + T].astype(np.int64)
            d = rng.randint(lo, hi)
            r_in = base.copy()
            state = rng.getstate()
            sp = place_recall(r_in, ex, recall.tail, d, rng, True)
            rng.setstate(state)
            r_out = base.copy()
            place_recall(r_out, ex, recall.tail, d, rng, False)
            if sp is None:
                continue
            rows_in.append(r_in)
            rows_out.append(r_out)
            spans.append(sp)
        out = {}
        for name, rows in (("in_context", rows_in), ("out_of_context", rows_out)):
            ok = 0
            for i in range(0, len(rows), 8):
                x = torch.from_numpy(np.stack(rows[i:i + 8])).to(device)
                with autocast(device):
                    pred = model(x).argmax(-1).cpu().numpy()
                for j, r in enumerate(rows[i:i + 8]):
                    pa, la = spans[i + j]
                    ok += int(np.array_equal(pred[j, pa - 1:pa - 1 + la], r[pa:pa + la]))
            out[name] = ok / max(len(rows), 1)
        out["n"] = len(rows_in)
        res["%d-%d" % (lo, hi)] = out
    model.train()
    return res


@torch.no_grad()
def generate(model, sp, prompt, n, device, temp=0.8, top_k=40, seed=0):
    model.eval()
    g = torch.Generator(device="cpu").manual_seed(seed)
    ids = [2] + sp.encode(prompt)
    for _ in range(n):
        x = torch.tensor([ids[-model.cfg.ctx:]], device=device)
        with autocast(device):
            lg = model(x)[0, -1].float().cpu()
        if temp == 0:
            nxt = int(lg.argmax())
        else:
            v, ix = torch.topk(lg / temp, top_k)
            nxt = int(ix[torch.multinomial(torch.softmax(v, -1), 1, generator=g)])
        if nxt == 1:
            break
        ids.append(nxt)
    model.train()
    return sp.decode(ids[1:])


class autocast:
    def __init__(self, device):
        self.on = str(device).startswith("cuda")
        self.ctx = torch.autocast("cuda", dtype=torch.bfloat16) if self.on else None

    def __enter__(self):
        if self.ctx:
            self.ctx.__enter__()

    def __exit__(self, *a):
        if self.ctx:
            self.ctx.__exit__(*a)


# ------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", required=True, choices=sorted(PRESETS))
    ap.add_argument("--data", default=os.path.join(HERE, "data", "tokens"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--minutes", type=float, default=0, help="training time budget")
    ap.add_argument("--steps", type=int, default=0, help="or a fixed number of steps")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--p-recall", type=float, default=0.25)
    ap.add_argument("--dmin", type=int, default=200)
    ap.add_argument("--dmax", type=int, default=4000)
    ap.add_argument("--eval-every", type=float, default=45.0, help="seconds between quick evals")
    ap.add_argument("--ppl-ctx", default="1024,2048")
    ap.add_argument("--gguf-type", default="q8_0")
    ap.add_argument("--compile", type=int, default=1)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--vocab", type=int, default=0, help="override the preset's vocabulary size (smoke test)")
    ap.add_argument("--attn", default="flex", choices=["flex", "sdpa"], help="CUDA attention for windowed layers")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "tokenizer", "spm.model"))
    ap.add_argument("--recall-n", type=int, default=100, help="recall eval examples per distance bin")
    ap.add_argument("--samples", type=int, default=1, help="write sample generations")
    ap.add_argument("--init", default="", help="GGUF or checkpoint to continue from")
    args = ap.parse_args()
    if not args.minutes and not args.steps:
        sys.exit("train: give --minutes or --steps")
    if args.device == "cpu":
        torch.set_num_threads(1)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("train: --device cuda but torch sees no GPU (torch %s)" % torch.__version__)
    for f in ("train.bin", "valid.bin", "valid_ppl.bin", "recall_train.npz", "recall_eval.npz"):
        p = os.path.join(args.data, f)
        if not os.path.isfile(p) or os.path.getsize(p) == 0:
            sys.exit("train: missing or empty %s (run build_corpus.py, train_tokenizer.py, tokenize_corpus.py)" % p)
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    tr = np.fromfile(os.path.join(args.data, "train.bin"), dtype=np.uint16)
    vt = np.fromfile(os.path.join(args.data, "valid.bin"), dtype=np.uint16)
    vppl = np.fromfile(os.path.join(args.data, "valid_ppl.bin"), dtype=np.uint16)
    rtrain = Recall(os.path.join(args.data, "recall_train.npz"))
    reval = Recall(os.path.join(args.data, "recall_eval.npz"))
    if len(tr) < 10 * (args.seq + 1):
        sys.exit("train: only %d training tokens; refusing to train on (almost) nothing" % len(tr))
    log("train tokens %d, valid %d, ppl ids %d" % (len(tr), len(vt), len(vppl)))

    cfg = Config(**PRESETS[args.preset])
    cfg.dropout = args.dropout
    if args.vocab:
        cfg.vocab = args.vocab
    model = Model(cfg)
    if args.init:
        if args.init.endswith(".gguf"):
            c2, sd = export_gguf.load(args.init)
        else:
            sd = torch.load(args.init, map_location="cpu")["model"]
        model.load_state_dict(sd)
    model.to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    log("config", json.dumps(cfg.to_dict()), "params %.2fM" % (nparams / 1e6))

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "sink" not in n]
    nodecay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "sink" not in n)]
    opt_kw = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    if dev.type == "cuda":
        opt_kw["fused"] = True
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": nodecay, "weight_decay": 0.0}], **opt_kw)

    import model as model_mod
    fwd = model
    masks = {}
    modes = []
    if dev.type == "cuda":
        for il in range(cfg.n_layer):
            model.rope_for(il, args.seq, dev)
        if args.attn == "flex":
            modes.append(("flex", bool(args.compile)))
        modes += [("sdpa", bool(args.compile)), ("sdpa", False)]
    else:
        modes = [("ref", False)]

    batcher = Batcher(tr, args.seq, args.batch, rtrain, args.p_recall, args.dmin, args.dmax, args.seed)

    def train_step(x):
        x = x.to(dev, non_blocking=True)
        with autocast(dev):
            logits = fwd(x[:, :-1], masks)
        loss = F.cross_entropy(logits.float().reshape(-1, cfg.vocab), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    # the first steps double as a check of the attention path / compile; fall back on failure
    x0 = batcher.next()
    init_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for i, (impl, comp) in enumerate(modes):
        model_mod.IMPL["cuda"] = "flex" if impl == "flex" else "sdpa"
        masks = model.flex_masks(args.seq, dev) if impl == "flex" else {}
        fwd = torch.compile(model) if comp else model
        try:
            t_c = time.time()
            loss0 = train_step(x0).item()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            log("attention %s, compile %s: first step %.1fs" % (impl, comp, time.time() - t_c))
            break
        except Exception as e:  # noqa: BLE001
            if i == len(modes) - 1:
                raise
            log("mode %s/compile=%s failed (%s: %s); trying the next" % (impl, comp, type(e).__name__, str(e)[:400]))
            model.load_state_dict(init_state)
            opt.state.clear()
    res_mode = "%s%s" % (model_mod.IMPL["cuda"] if dev.type == "cuda" else "ref", "+compile" if fwd is not model else "")
    log("step 0 loss %.4f" % loss0)
    if not math.isfinite(loss0):
        sys.exit("train: non-finite loss at step 0")

    budget = args.minutes * 60.0
    t0 = time.time()
    step, last_eval, best, best_state = 1, t0, float("inf"), None
    hist = []
    tok_seen = args.batch * args.seq
    while True:
        el = time.time() - t0
        frac = (step / args.steps) if args.steps else (el / budget)
        if frac >= 1.0:
            break
        lr = args.lr * min(1.0, step / args.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        for gp in opt.param_groups:
            gp["lr"] = lr
        loss = train_step(batcher.next())
        tok_seen += args.batch * args.seq
        step += 1
        if step % 50 == 0 or (args.steps and step == args.steps):
            lv = loss.item()
            if not math.isfinite(lv):
                sys.exit("train: non-finite loss at step %d" % step)
            if time.time() - last_eval >= args.eval_every or args.steps:
                vl = quick_valid_loss(model, vt, min(args.seq, 1024), dev)
                last_eval = time.time()
                el = last_eval - t0
                hist.append(dict(step=step, sec=round(el, 1), train_loss=round(lv, 4), valid_loss=round(vl, 4),
                                 lr=lr, tokens=tok_seen))
                log("step %d  %.0fs  loss %.4f  valid %.4f (ppl %.2f)  lr %.2e  %.0f tok/s" %
                    (step, el, lv, vl, math.exp(vl), lr, tok_seen / max(el, 1e-9)))
                if vl < best:
                    best = vl
                    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    train_sec = time.time() - t0
    vl = quick_valid_loss(model, vt, min(args.seq, 1024), dev)
    log("final quick valid %.4f (best %.4f)" % (vl, best))
    if vl <= best or best_state is None:
        best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)

    res = dict(preset=args.preset, config=cfg.to_dict(), params=nparams, steps=step, train_seconds=round(train_sec, 1),
               attn_impl=res_mode, initial_loss=loss0, tokens_seen=tok_seen, epochs=round(tok_seen / len(tr), 2), history=hist,
               batch=args.batch, seq=args.seq, lr=args.lr, torch=torch.__version__,
               device=torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu")
    ck = os.path.join(args.out, "model.pt")
    torch.save({"config": cfg.to_dict(), "model": {k: v.cpu() for k, v in best_state.items()}}, ck)

    ctxs = [int(c) for c in args.ppl_ctx.split(",") if int(c) <= cfg.ctx]
    res["ppl_torch"] = {}
    for c in ctxs:
        p, nch, ntok = ppl_llama_protocol(model, vppl, c, dev)
        p32, _, _ = ppl_llama_protocol(model, vppl, c, dev, max_chunks=32)
        res["ppl_torch"][str(c)] = dict(ppl=p, chunks=nch, scored=ntok, ppl_first32=p32)
        log("held-out ppl (llama protocol, n_ctx %d, %d chunks): %.3f   first 32 chunks: %.3f" % (c, nch, p, p32))

    bins = [(64, 200), (200, 500), (500, 1000), (1000, 2000), (2000, 4000)]
    res["recall"] = recall_eval(model, vt, reval, min(cfg.ctx, 4096), dev, bins, args.recall_n)
    log("recall", json.dumps(res["recall"]))

    gg = os.path.join(args.out, "model.gguf")
    size = export_gguf.export(cfg, best_state, gg, args.gguf_type, args.tokenizer, name="channel-" + cfg.arch)
    res["gguf_bytes"] = size
    log("exported %s: %d bytes" % (gg, size))
    # read the file back and evaluate exactly the weights it holds
    cfg2, sd2 = export_gguf.load(gg)
    m2 = Model(cfg2)
    m2.load_state_dict(sd2)
    m2.to(dev)
    res["ppl_gguf"] = {}
    for c in ctxs:
        p, nch, ntok = ppl_llama_protocol(m2, vppl, c, dev)
        p32, _, _ = ppl_llama_protocol(m2, vppl, c, dev, max_chunks=32)
        res["ppl_gguf"][str(c)] = dict(ppl=p, chunks=nch, scored=ntok, ppl_first32=p32)
        log("GGUF (%s) held-out ppl n_ctx %d: %.3f  first 32: %.3f" % (args.gguf_type, c, p, p32))
    res["recall_gguf"] = recall_eval(m2, vt, reval, min(cfg.ctx, 4096), dev, bins, args.recall_n)
    log("recall gguf", json.dumps(res["recall_gguf"]))

    try:
        if not args.samples:
            raise ImportError("samples disabled")
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
        prompts = ["The history of the city", "Once upon a time, there was", "The most important thing to remember is",
                   "In the beginning"]
        res["samples"] = [dict(prompt=pr, text=generate(m2, sp, pr, 80, dev, seed=i)) for i, pr in enumerate(prompts)]
        res["samples_greedy"] = [dict(prompt=pr, text=generate(m2, sp, pr, 60, dev, temp=0)) for pr in prompts[:2]]
        for s in res["samples"]:
            log("SAMPLE", repr(s["text"][:400]))
    except ImportError:
        log("sentencepiece not importable here: no samples")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    log("done")


if __name__ == "__main__":
    main()
