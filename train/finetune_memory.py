#!/usr/bin/env python3
"""Fine-tune a Channel model to use its recall tier, and train its retrieval head.

Usage (GPU machine; data from tokenize_corpus.py + make_memory_bank.py):
  python3 train/finetune_memory.py --init models/channel-bounded.gguf --minutes 5 --out OUT

What a training sequence looks like is what the engine's global layers see after a recall
(docs/kv-geometry.md, "Virtual positions"): the anchor, then the recalled episodes (tier 3,
1-8 episodes of 32-64 tokens: the one that holds the fact, or not, among distractors: other
facts' episodes and plain text), then the working window (corpus text), in which a question
about the fact is asked, in other words than the fact was stated, and answered:

    [<bos>] [ep_1 .. ep_k] [window text ...] [question] [answer] [window text ...]

Losses:
  * next-token loss everywhere (keeps the language model), the answer tokens weighted up;
  * the retrieval loss (InfoNCE): the retrieval head's query at the question's last token must
    score the episode holding the fact above every other episode and 64-token chunk of the
    batch.  score(episode) = max over its tokens t of <unit(Wq x_cue), unit(Wk x_t)>, x = final
    hidden state (after the output norm).  Queries are taken only in rows whose tier 3 does NOT
    hold their fact (it sits in another row), so the head cannot learn to read the answer out
    of what was recalled: the engine takes the cue before it recalls.

The head is exported as GGUF metadata (channel.retrieval.{dim,query,key}, f32 arrays): llama.cpp
ignores unknown keys but refuses unknown tensors.  Evaluation (results.json): held-out
perplexity (llama-perplexity protocol), answer accuracy with 1/3/6 recalled episodes on facts of
held-out templates and names, and recall@1/@3 of the retrieval methods (centroid, keys, proj)
among ~10^4 episodes of held-out text.
"""
import argparse
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_gguf  # noqa: E402
from engine_recall import encode_in_context, place  # noqa: E402
from model import Model  # noqa: E402
from train import autocast, ppl_llama_protocol, quick_valid_loss, log  # noqa: E402

BOS = 2
EP_MIN, EP_MAX = 32, 64   # episode lengths (the engine cuts at most 64 tokens, at span ends)
MAX_EPISODES = 8          # 8 x 64 = 512 recall slots


class Bank:
    """Tokenized facts (make_memory_bank.py): statement, question (ends where the answer
    starts), answer, and the attribute id (distractors prefer the same attribute)."""

    def __init__(self, path):
        z = np.load(path)
        self.parts = {k: (z[k], z[k + "_off"]) for k in ("stmt", "q", "ans")}
        self.attr = z["attr"]
        self.n = len(self.attr)
        # entity hash and cluster (facts about one entity and its look-alikes); banks made
        # before these existed have one cluster per fact
        self.ent = z["ent"] if "ent" in z.files else np.arange(self.n, dtype=np.int64)
        self.clu = z["clu"] if "clu" in z.files else np.arange(self.n, dtype=np.int32)
        self.by_attr, self.by_clu = {}, {}
        for i, a in enumerate(self.attr):
            self.by_attr.setdefault(int(a), []).append(i)
        for i, c in enumerate(self.clu):
            self.by_clu.setdefault(int(c), []).append(i)

    def conflicts(self, i, j):
        """j states another value for what i states (same entity, same attribute)."""
        return i != j and self.ent[i] == self.ent[j] and self.attr[i] == self.attr[j]

    def get(self, kind, i):
        a, off = self.parts[kind]
        return a[off[i]:off[i + 1]].astype(np.int64)

    def value_span(self, i):
        """(offset in the statement, n): the answer's first n tokens (its final "." left out) as
        the statement spells them, or None where the statement tokenizes the value otherwise."""
        if not hasattr(self, "_vspan"):
            self._vspan = {}
        if i not in self._vspan:
            st, ans = self.get("stmt", i), self.get("ans", i)
            body = ans[:-1] if len(ans) > 1 else ans
            hit = None
            for n in range(len(body), 0, -1):      # the longest prefix the statement holds
                for o in range(len(st) - n + 1):
                    if np.array_equal(st[o:o + n], body[:n]):
                        hit = (o, n)
                        break
                if hit:
                    break
            self._vspan[i] = hit
        return self._vspan[i]


class RetrievalHead(nn.Module):
    def __init__(self, d, dim):
        super().__init__()
        self.q = nn.Linear(d, dim, bias=False)
        self.k = nn.Linear(d, dim, bias=False)
        nn.init.normal_(self.q.weight, std=d ** -0.5)
        nn.init.normal_(self.k.weight, std=d ** -0.5)

    def query(self, x):
        return F.normalize(self.q(x.float()), dim=-1)

    def key(self, x):
        return F.normalize(self.k(x.float()), dim=-1)


def fact_episode(bank, i, corpus, rng, nprng, where=None):
    """A 32-64 token chunk of corpus text with fact i's statement inside it (where: a list that
    receives the statement's offset in the episode)."""
    st = bank.get("stmt", i)
    n = max(rng.randint(EP_MIN, EP_MAX), len(st) + 2)
    s = int(nprng.integers(0, len(corpus) - n - 1))
    ep = corpus[s:s + n].astype(np.int64).copy()
    o = rng.randint(0, n - len(st))
    ep[o:o + len(st)] = st
    if where is not None:
        where.append(o)
    return ep


def filler_episode(corpus, rng, nprng):
    n = rng.randint(EP_MIN, EP_MAX)
    s = int(nprng.integers(0, len(corpus) - n - 1))
    return corpus[s:s + n].astype(np.int64).copy()


class MemoryBatcher:
    """Rows of length T+1 with per-row metadata for the losses.

    A memory row owns 1-4 facts, each asked once at its own place in the window.  A fact's
    episode sits either in this row's tier 3 ("qa": its answer is trained) or in another
    memory row's tier 3 ("ret": its answer is masked and its question is a retrieval query).
    Tier 3 is filled up to 8 episodes with distractors: other facts (same attribute first)
    and plain text."""

    def __init__(self, corpus, bank, T, B, p_mem, p_qa, seed, max_q=4, hard=0.0, p_win=0.0, p_src=0.0):
        self.corpus, self.bank, self.T, self.B = corpus, bank, T, B
        self.p_mem, self.p_qa, self.max_q = p_mem, p_qa, max_q
        self.p_src = p_src   # share of memory rows whose tier 3 is encoded in context (engine_recall.py)
        self.hard, self.p_win = hard, p_win   # share of look-alike distractors; rows with facts in the window
        self.qa_weight = 3.0
        # Loss weight of the fact statements (in tier 3 and in the window) and of the questions
        # as targets. 1: the model also learns to write them (and then drifts into them in free
        # text); 0: they are read, never learnt as text to produce. Answers keep qa_weight.
        self.prompt_weight = 1.0
        self.stmt_span = {}   # id(episode array) -> (offset, length) of its statement, per batch
        self.rng = random.Random(seed)
        self.nprng = np.random.default_rng(seed)

    def fact_episode(self, i):
        """fact_episode() that remembers where the statement sits (for prompt_weight); the same
        random draws as before."""
        where = []
        ep = fact_episode(self.bank, i, self.corpus, self.rng, self.nprng, where)
        self.stmt_span[id(ep)] = (where[0], len(self.bank.get("stmt", i)))
        return ep

    def copy_targets(self, r, p, spans, questions):
        """(query position, key position) pairs of row r for the copy loss: the input position
        that predicts answer token j of a trained question, and where token j of the value sits
        in the recalled episode of its fact (this row's tier 3)."""
        out = []
        where = {own: st for (st, _, own) in spans if own is not None and own[0] == r}
        for i, q in enumerate(questions):
            if q["mode"] != "qa" or (r, i) not in where:
                continue
            vs = self.bank.value_span(p["facts"][i])
            if vs is None:
                continue
            key0 = where[(r, i)] + p["stmt_at"][(r, i)] + vs[0]
            out += [(q["pa"] - 1 + j, key0 + j) for j in range(min(vs[1], q["la"]))
                    if q["pa"] - 1 + j < self.T]
        return out

    def hard_distractors(self, anchors, n, avoid):
        """Training: a share `hard` of the distractors come from an anchor fact's cluster (the same
        entity with another attribute, a look-alike entity), the rest as distractors() makes them.
        Never a fact that contradicts one in `avoid` (same entity and attribute)."""
        out, bank = [], self.bank
        for _ in range(n):
            a = self.rng.choice(anchors)
            r = self.rng.random()
            if r < self.hard:
                pool = bank.by_clu[int(bank.clu[a])]
            elif r < self.hard + (1 - self.hard) * 0.35:
                pool = bank.by_attr[int(bank.attr[a])]
            elif r < self.hard + (1 - self.hard) * 0.7:
                pool = None
                j = self.rng.randrange(bank.n)
            else:
                out.append(filler_episode(self.corpus, self.rng, self.nprng))
                continue
            if pool is not None:
                j = self.rng.choice(pool)
            if j in avoid or any(bank.conflicts(f, j) for f in avoid):
                out.append(filler_episode(self.corpus, self.rng, self.nprng))
                continue
            out.append(self.fact_episode(j))
        return out

    def distractors(self, fact, n):
        out = []
        for _ in range(n):
            r = self.rng.random()
            if r < 0.35:  # same attribute, other entity: the hardest case
                pool = self.bank.by_attr[int(self.bank.attr[fact])]
                out.append(self.fact_episode(self.rng.choice(pool)))
            elif r < 0.7:
                out.append(self.fact_episode(self.rng.randrange(self.bank.n)))
            else:
                out.append(filler_episode(self.corpus, self.rng, self.nprng))
        return out

    def next(self):
        T, B, rng = self.T, self.B, self.rng
        self.stmt_span.clear()
        plan = []
        for r in range(B):
            if rng.random() >= self.p_mem:
                plan.append(None)
                continue
            n_q = rng.randint(1, self.max_q)
            facts = [rng.randrange(self.bank.n) for _ in range(n_q)]
            plan.append(dict(facts=facts, modes=["qa" if rng.random() < self.p_qa else "ret" for _ in facts],
                             eps=[], own=[], stmt_at={}))   # own[i] = (row, question index) or None
        mem_rows = [r for r in range(B) if plan[r] is not None]
        for r in mem_rows:
            p = plan[r]
            for i, (f, m) in enumerate(zip(p["facts"], p["modes"])):
                where = []
                ep = fact_episode(self.bank, f, self.corpus, rng, self.nprng, where)
                self.stmt_span[id(ep)] = (where[0], len(self.bank.get("stmt", f)))
                host = r
                if m == "ret":
                    hosts = [h for h in mem_rows if h != r and len(plan[h]["eps"]) < MAX_EPISODES]
                    if not hosts:
                        p["modes"][i] = "none"
                        continue
                    host = rng.choice(hosts)
                elif len(p["eps"]) >= MAX_EPISODES:
                    p["modes"][i] = "none"
                    continue
                at = rng.randint(0, len(plan[host]["eps"]))
                plan[host]["eps"].insert(at, ep)
                plan[host]["own"].insert(at, (r, i))
                plan[host]["stmt_at"][(r, i)] = where[0]
        for r in mem_rows:
            p = plan[r]
            room = MAX_EPISODES - len(p["eps"])
            if room > 0:
                held = [plan[o[0]]["facts"][o[1]] for o in p["own"] if o is not None]
                if self.hard > 0:
                    eps = self.hard_distractors(held or p["facts"], rng.randint(0, room), set(held + p["facts"]))
                else:
                    eps = self.distractors(p["facts"][0], rng.randint(0, room))
                for ep in eps:
                    at = rng.randint(0, len(p["eps"]))
                    p["eps"].insert(at, ep)
                    p["own"].insert(at, None)
        x = np.empty((B, T + 1), dtype=np.int64)
        w = np.ones((B, T), dtype=np.float32)          # loss weight of target t+1 at input t
        am = np.zeros((B, T), dtype=np.float32)        # 1 where the target is a trained answer token
        meta = []
        for r in range(B):
            p = plan[r]
            s = int(self.nprng.integers(0, len(self.corpus) - T - 2))
            if p is None:
                x[r] = self.corpus[s:s + T + 1]
                meta.append(None)
                continue
            spans, pos = [], 1
            for ep, own in zip(p["eps"], p["own"]):
                spans.append((pos, len(ep), own))
                pos += len(ep)
            R = pos
            # engine layout: the tier-3 positions hold the text before the window (what the
            # sliding layers see there); the global layers get the episodes' K/V from elsewhere
            src = self.p_src > 0 and rng.random() < self.p_src
            qas = [(self.bank.get("q", f), self.bank.get("ans", f)) for f in p["facts"]]
            room = T + 1 - R - sum(len(q) + len(a) for q, a in qas)
            # where each question goes in the window: one of them late in a full window
            cuts = sorted(rng.randint(16, max(16, room - 1)) for _ in qas)
            if rng.random() < 0.5:
                cuts[-1] = max(cuts[-1], room - rng.randint(1, 64))
            fill = self.corpus[s + R - 1:s + R - 1 + room].astype(np.int64)
            win_sts = []   # (start in fill, length) of the statements put in the window
            if self.p_win > 0 and rng.random() < self.p_win:
                # other facts stated in the window itself (look-alikes first): the answer must
                # come from the fact asked about, not from the nearest value
                sts = []
                for _ in range(rng.randint(1, 3)):
                    a = rng.choice(p["facts"])
                    j = rng.choice(self.bank.by_clu[int(self.bank.clu[a])]) if rng.random() < 0.6 \
                        else rng.randrange(self.bank.n)
                    if j in p["facts"] or any(self.bank.conflicts(f, j) for f in p["facts"]):
                        continue
                    sts.append(self.bank.get("stmt", j))
                if sts:
                    body = fill[:room - sum(len(t) for t in sts)]
                    at = sorted(rng.randint(0, len(body)) for _ in sts)
                    pieces, prev = [], 0
                    for c, t in zip(at, sts):
                        win_sts.append((c + sum(len(u) for u in pieces[1::2]), len(t)))
                        pieces += [body[prev:c], t]
                        prev = c
                    fill = np.concatenate(pieces + [body[prev:]])
            head = [self.corpus[s:s + R - 1].astype(np.int64)] if src else p["eps"]
            parts, prev, qs = [np.array([BOS])] + head, 0, []
            pos = R
            seg = []       # (fill index where a segment starts, its row position)
            for (q, a), c in zip(qas, cuts):
                c = max(prev, min(c, room))
                seg.append((prev, pos))
                parts.append(fill[prev:c])
                pos += c - prev
                qs.append((pos, pos + len(q), len(a)))
                parts += [q, a]
                pos += len(q) + len(a)
                prev = c
            seg.append((prev, pos))
            parts.append(fill[prev:])
            row = np.concatenate(parts)[:T + 1]
            x[r] = row
            for (st, n, _) in spans:    # the first token of an episode follows unrelated text
                w[r, st - 1] = 0.0
            if src:                     # text whose global layers see recalled K/V: not a target
                w[r, :R] = 0.0
            if self.prompt_weight != 1.0:
                # statements and questions are read, not learnt as text to write: position t's
                # weight is that of predicting token t + 1
                def lower(a, b):
                    a, b = max(a, 0), min(b, T)
                    if a < b:
                        w[r, a:b] = np.minimum(w[r, a:b], self.prompt_weight)
                if not src:
                    for (st, _, _), ep in zip(spans, p["eps"]):
                        if id(ep) in self.stmt_span:
                            o, n = self.stmt_span[id(ep)]
                            lower(st + o - 1, st + o + n - 1)
                for f0, n in win_sts:
                    for f in range(f0, f0 + n):  # a question may be cut into a statement
                        f_start, row_pos = [sg for sg in seg if sg[0] <= f][-1]
                        lower(row_pos + f - f_start - 1, row_pos + f - f_start)
                for pq, pa, _ in qs:
                    lower(pq - 1, pa - 1)
            questions = []
            for i, ((pq, pa, la), m) in enumerate(zip(qs, p["modes"])):
                if pa + la > T:
                    m = "none"
                if m == "qa":
                    w[r, pa - 1:pa - 1 + la] = self.qa_weight
                    am[r, pa - 1:pa - 1 + la] = 1.0
                elif pa - 1 < T:
                    w[r, pa - 1:min(T, pa - 1 + la)] = 0.0   # the answer is not in this row's context
                questions.append(dict(mode=m, pq=pq, pa=pa, la=la, cue=pa - 1))
            meta.append(dict(spans=spans, R=R, questions=questions, src=src, eps=p["eps"],
                             copy=self.copy_targets(r, p, spans, questions)))
        self.last_answer_mask = torch.from_numpy(am)
        return torch.from_numpy(x), torch.from_numpy(w), meta


def batch_mem(model, meta, corpus, nprng, B, T, device, grad=False):
    """model.Model's `mem` for the rows of a batch laid out for the engine (meta["src"]): their
    episodes encoded in context (grad: through the graph, see encode_in_context)."""
    eps, rows_spans = [], []
    for r in range(B):
        spans = []
        m = meta[r]
        if m is not None and m.get("src"):
            for (st, n, _), ep in zip(m["spans"], m["eps"]):
                spans.append((st, n, len(eps)))
                eps.append(ep)
        rows_spans.append(spans)
    enc = encode_in_context(model, eps, corpus, nprng, device, autocast=autocast, grad=grad) if eps else []
    return place(model, rows_spans, enc, B, T, device)


def candidate_index(meta, B, T, device):
    """Every recalled episode and every 64-token chunk of window text of the batch, as rows of
    token indices into the flattened [B*T] hidden states (-1 = padding).  Returns (idx [C, 64],
    {(row, question) -> candidate index of that question's fact episode})."""
    cands, owner = [], {}
    ar = np.arange(64)
    for r in range(B):
        m = meta[r]
        if m is None:
            for s in range(0, T - 64 + 1, 64):
                cands.append(r * T + s + ar)
            continue
        # a row laid out for the engine holds its episodes' K/V, not their states: its episodes
        # are no candidates (their questions are skipped).  Mixing in states encoded elsewhere
        # let the head tell the two kinds apart, and recall fell (runs srcA..srcV2)
        for (st, n, own) in ([] if m.get("src") else m["spans"]):
            if own is not None:
                owner[own] = len(cands)
            c = np.full(64, -1)
            c[:n] = r * T + st + ar[:n]
            cands.append(c)
        busy = [(q["pq"] - 8, q["pa"] + q["la"] + 8) for q in m["questions"]]
        for s in range(m["R"], T - 64 + 1, 64):
            if any(s + 64 > lo and s < hi for lo, hi in busy):   # never a question itself
                continue
            cands.append(r * T + s + ar)
    return torch.from_numpy(np.stack(cands)).to(device), owner


def retrieval_loss(head, hidden, meta, tau):
    B, T, d = hidden.shape
    idx, owner = candidate_index(meta, B, T, hidden.device)
    qs = [(r, i) for r in range(B) if meta[r] is not None
          for i, q in enumerate(meta[r]["questions"]) if q["mode"] == "ret" and (r, i) in owner]
    if not qs:
        return None, 0.0
    flat = hidden.reshape(B * T, d)
    keys = head.key(flat)                                           # [B*T, dr]
    cue = torch.stack([flat[r * T + meta[r]["questions"][i]["cue"]] for r, i in qs])
    qv = head.query(cue)                                            # [Q, dr]
    sim = qv @ keys.t()                                             # [Q, B*T]
    valid = idx >= 0
    g = sim[:, idx.clamp(min=0)]                                    # [Q, C, 64]
    g = g.masked_fill(~valid[None], -2.0)
    score = g.max(-1).values / tau                                  # [Q, C]
    tgt = torch.tensor([owner[q] for q in qs], device=hidden.device)
    loss = F.cross_entropy(score, tgt)
    acc = (score.argmax(-1) == tgt).float().mean().item()
    return loss, acc


def copy_loss(model, cap, meta, T):
    """The copy objective: at the position that predicts answer token j, some head of a global
    layer must attend to token j of the value where the recalled episode states it.  Loss: minus
    the log of the best head's attention weight on that key (every head of every global layer
    competes, so the model picks its copy heads).  This is the circuit the answers need whatever
    the statement's word order ("V is listed as the A of E" as well as "the A of E is V"): the
    next-token loss alone teaches it only through the answer tokens.  Returns (loss, mean best
    weight) or (None, 0)."""
    from model import apply_rope
    cfg = model.cfg
    H, KV, hd = cfg.n_head, cfg.n_kv, cfg.head_dim
    rep, scale = H // KV, 1.0 / math.sqrt(hd)
    rows = [(r, m["copy"]) for r, m in enumerate(meta) if m is not None and m.get("copy")]
    if not rows:
        return None, 0.0
    best_all = []
    for il in sorted(key for key in cap if isinstance(key, int)):
        q, k, _ = cap[il]
        rd, _ = cfg.rope(il)
        cos, sin = model.rope_for(il, T, q.device)
        per_layer = []
        for r, pairs in rows:
            tq = torch.tensor([a for a, _ in pairs], device=q.device)
            tk = torch.tensor([b for _, b in pairs], device=q.device)
            qs = apply_rope(q[r][:, tq][None].float(), cos[tq], sin[tq], rd)[0]   # [H, n, hd]
            ks = apply_rope(k[r][None].float(), cos[:T], sin[:T], rd)[0]          # [KV, T, hd]
            lg = torch.einsum("kgnd,ktd->nkgt", qs.view(KV, rep, -1, hd), ks) * scale  # [n, KV, rep, T]
            causal = torch.arange(T, device=q.device)[None, :] > tq[:, None]       # [n, T]
            lg = lg.masked_fill(causal[:, None, None, :], float("-inf"))
            lp = torch.log_softmax(lg, dim=-1)
            per_layer.append(lp.gather(-1, tk.view(-1, 1, 1, 1).expand(-1, KV, rep, 1))[..., 0].reshape(len(pairs), H))
        best_all.append(torch.cat(per_layer))                                      # [N, H]
    lp = torch.cat(best_all, dim=1).max(dim=1).values                             # [N]
    return -lp.mean(), lp.exp().mean().item()


# ------------------------------------------------------------------ evaluation
@torch.no_grad()
def eval_answers(model, bank, corpus, T, device, n=300, seed=11, engine=False):
    """Teacher-forced exact match of the answer with the fact's episode in tier 3 among k-1
    distractor episodes (k = 1, 3, 6), the question at the end of a full window; and with
    no fact episode (k distractors only): the out-of-memory baseline.  engine=True: tier 3 as
    the engine builds it (episodes encoded in their own context, engine_recall.py); the keys
    then end in "_engine"."""
    model.eval()
    out = {}
    for k, with_fact in ((1, True), (3, True), (6, True), (3, False)):
        b = MemoryBatcher(corpus, bank, T, 1, 1.0, 1.0, seed + k)
        ok = tot = 0
        rows, spans, tier3 = [], [], []
        for i in range(n):
            fact = b.rng.randrange(bank.n)
            eps = b.distractors(fact, k - 1 if with_fact else k)
            if with_fact:
                eps.insert(b.rng.randint(0, len(eps)), fact_episode(bank, fact, corpus, b.rng, b.nprng))
            q, a = bank.get("q", fact), bank.get("ans", fact)
            R = 1 + sum(len(e) for e in eps)
            room = T - R - len(q) - len(a)
            s = int(b.nprng.integers(0, len(corpus) - T - 2))
            head = corpus[s:s + R - 1].astype(np.int64) if engine else np.concatenate(eps)
            row = np.concatenate([[BOS], head, corpus[s + R - 1:s + R - 1 + room].astype(np.int64), q, a])
            rows.append(row)
            spans.append((len(row) - len(a), len(a)))
            tier3.append(eps)
        for i in range(0, n, 16):
            x = torch.from_numpy(np.stack(rows[i:i + 16])).to(device)
            mem = None
            if engine:
                meta = []
                for eps in tier3[i:i + 16]:
                    st, sp = 1, []
                    for e in eps:
                        sp.append((st, len(e), None))
                        st += len(e)
                    meta.append(dict(src=True, spans=sp, eps=eps))
                mem = batch_mem(model, meta, corpus, b.nprng, x.shape[0], x.shape[1], device)
            with autocast(device):
                pred = model(x, mem=mem).argmax(-1).cpu().numpy()
            for j, r in enumerate(rows[i:i + 16]):
                pa, la = spans[i + j]
                # the final "." of the answer is not required
                ok += int(np.array_equal(pred[j, pa - 1:pa - 1 + la - 1], r[pa:pa + la - 1]))
                tot += 1
        out["k%d%s%s" % (k, "" if with_fact else "_no_fact", "_engine" if engine else "")] = ok / tot
    model.train()
    return out


@torch.no_grad()
def eval_retrieval(model, head, bank, text, device, n_facts=200, n_tokens=600_000, seed=3):
    """Recall@1/@3 of the right episode among every 64-token episode of n_tokens of held-out
    text with n_facts statements planted, for the centroid, keys and proj methods.  Episode
    states come from a pass over the text in windows of 4096 (stride 2048), as a stream would
    compute them; each question is asked after 1024 tokens of other text."""
    model.eval()
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    s0 = int(nprng.integers(0, max(1, len(text) - n_tokens - 1)))
    stream = text[s0:s0 + n_tokens].astype(np.int64).copy()
    n_ep = len(stream) // 64
    stream = stream[:n_ep * 64]
    facts = rng.sample(range(bank.n), n_facts)
    ep_of = {}
    slots = rng.sample(range(4, n_ep), n_facts)
    for f, e in zip(facts, slots):
        st = bank.get("stmt", f)
        o = rng.randint(0, 64 - len(st)) if len(st) < 64 else 0
        stream[e * 64 + o:e * 64 + o + len(st)] = st[:64]
        ep_of[f] = e
    globals_ = [il for il in range(model.cfg.n_layer) if model.cfg.is_global(il)]
    H, KV, hd = model.cfg.n_head, model.cfg.n_kv, model.cfg.head_dim
    hid = torch.empty(len(stream), model.cfg.d, device=device)
    keys = {il: torch.empty(KV, len(stream), hd, device=device) for il in globals_}
    W, S = 4096, 2048
    for s in range(0, len(stream), S):
        lo = max(0, s + S - W)
        x = torch.from_numpy(np.concatenate([[BOS], stream[lo:s + S]])).to(device)[None]
        cap = {}
        with autocast(device):
            _, h = model(x, return_hidden=True, capture=cap)
        keep = slice(1 + (s - lo), None)
        hid[s:s + S] = h[0, keep].float()
        for il in globals_:
            keys[il][:, s:s + S] = cap[il][1][0, :, keep].float()
    # per-episode summaries
    cent = F.normalize(hid.view(n_ep, 64, -1).mean(1), dim=-1)                 # [E, d]
    pk = head.key(hid).view(n_ep, 64, -1) if head is not None else None        # [E, 64, dr]
    res = {m: [0, 0] for m in ("centroid", "keys", "proj", "hybrid")}
    for f in facts:
        q = bank.get("q", f)
        s = int(nprng.integers(0, len(text) - 1100))
        x = torch.from_numpy(np.concatenate([[BOS], text[s:s + 1024].astype(np.int64), q])).to(device)[None]
        cap = {}
        with autocast(device):
            _, h = model(x, return_hidden=True, capture=cap)
        h = h[0].float()
        scores = {}
        cq = F.normalize(h[-len(q):].mean(0), dim=-1)
        scores["centroid"] = cent @ cq
        ks = torch.zeros(n_ep, device=device)
        for il in globals_:
            qv = cap[il][0][0, :, -1].float()                     # [H, hd]
            for hh in range(H):
                kk = keys[il][hh // (H // KV)].view(n_ep, 64, hd)  # [E, 64, hd]
                ks += (kk @ qv[hh]).max(-1).values / math.sqrt(hd)
        scores["keys"] = ks
        if pk is not None:
            scores["proj"] = (pk @ head.query(h[-1])).max(-1).values
        z = lambda v: (v - v.mean()) / (v.std() + 1e-6)  # noqa: E731
        scores["hybrid"] = z(scores["centroid"]) + z(scores["keys"])
        for m, sc in scores.items():
            top = torch.topk(sc, 3).indices.tolist()
            res[m][0] += int(top[0] == ep_of[f])
            res[m][1] += int(ep_of[f] in top)
    model.train()
    return {m: dict(recall_at_1=v[0] / n_facts, recall_at_3=v[1] / n_facts)
            for m, v in res.items() if m != "proj" or head is not None} | {"episodes": n_ep, "facts": n_facts}


# ------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", required=True, help="GGUF to start from")
    ap.add_argument("--data", default=os.path.join(HERE, "data", "tokens"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--minutes", type=float, default=0)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--head-lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--p-mem", type=float, default=0.7)
    ap.add_argument("--p-qa", type=float, default=0.6)
    ap.add_argument("--ret-dim", type=int, default=64)
    ap.add_argument("--ret-weight", type=float, default=0.5)
    ap.add_argument("--tau", type=float, default=0.05)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--compile", type=int, default=1)
    ap.add_argument("--eval-facts", type=int, default=200)
    ap.add_argument("--eval-tokens", type=int, default=600_000)
    ap.add_argument("--eval-n", type=int, default=300)
    ap.add_argument("--ppl-ctx", type=int, default=2048)
    ap.add_argument("--ppl-chunks", type=int, default=0, help="0: the whole held-out file")
    ap.add_argument("--gguf-type", default="q8_0")
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "tokenizer", "spm.model"))
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-q", type=int, default=4, help="questions per memory row")
    ap.add_argument("--qa-weight", type=float, default=3.0, help="loss weight of answer tokens")
    ap.add_argument("--prompt-weight", type=float, default=1.0,
                    help="loss weight of the fact statements and questions as targets (0: read only, "
                         "never learnt as text to write)")
    ap.add_argument("--ans-loss", type=float, default=0.0,
                    help="weight of a separate term: the mean loss over trained answer tokens")
    ap.add_argument("--copy-loss", type=float, default=0.0,
                    help="weight of the copy objective (copy_loss): a global head attends to the value")
    ap.add_argument("--hard", type=float, default=0.0,
                    help="share of tier-3 distractors from a recalled fact's cluster (same entity, look-alikes)")
    ap.add_argument("--p-src", type=float, default=0.0,
                    help="share of memory rows whose tier 3 is laid out as the engine does: episodes "
                         "encoded in their own context, their K/V placed into the global layers")
    ap.add_argument("--src-grad", type=int, default=0,
                    help="with --p-src: train through the encoding of the episodes too (the model learns "
                         "to write an episode that reads well after a stream, not only to read it)")
    ap.add_argument("--p-win", type=float, default=0.0,
                    help="share of memory rows with 1-3 other facts stated in the window")
    ap.add_argument("--bank", default="memory_train.npz",
                    help="training fact bank in DATA (make_memory_bank.py --train-name)")
    ap.add_argument("--copy-to", default="",
                    help="also write NAME.gguf.part-* (16 MB pieces) and NAME.results.json here as soon as "
                         "they exist, so that a call cut short still returns the model")
    ap.add_argument("--copy-name", default="model")
    ap.add_argument("--ppl-before", type=float, default=0.0,
                    help="the init's held-out ppl, known: skip the evaluations before training")
    args = ap.parse_args()
    if not args.minutes and not args.steps:
        sys.exit("finetune_memory: give --minutes or --steps")
    for f in ("train.bin", "valid.bin", "valid_ppl.bin", args.bank, "memory_eval.npz"):
        p = os.path.join(args.data, f)
        if not os.path.isfile(p) or os.path.getsize(p) == 0:
            sys.exit("finetune_memory: missing or empty %s (tokenize_corpus.py, make_memory_bank.py)" % p)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("finetune_memory: no CUDA device visible to torch")
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    tr = np.fromfile(os.path.join(args.data, "train.bin"), dtype=np.uint16)
    vt = np.fromfile(os.path.join(args.data, "valid.bin"), dtype=np.uint16)
    vppl = np.fromfile(os.path.join(args.data, "valid_ppl.bin"), dtype=np.uint16)
    btrain = Bank(os.path.join(args.data, args.bank))
    beval = Bank(os.path.join(args.data, "memory_eval.npz"))

    cfg, sd = export_gguf.load(args.init)
    cfg.ctx = max(cfg.ctx, args.seq)
    cfg.dropout = args.dropout
    model = Model(cfg)
    model.load_state_dict(sd)
    model.to(dev)
    head = RetrievalHead(cfg.d, args.ret_dim).to(dev)
    from gguf_writer import read_gguf
    meta0, _ = read_gguf(args.init)
    if "channel.retrieval.query" in meta0:   # continue a head trained before
        dim = int(meta0["channel.retrieval.dim"])
        head = RetrievalHead(cfg.d, dim).to(dev)
        with torch.no_grad():
            head.q.weight.copy_(torch.tensor(meta0["channel.retrieval.query"]).view(dim, cfg.d))
            head.k.weight.copy_(torch.tensor(meta0["channel.retrieval.key"]).view(dim, cfg.d))
        args.ret_dim = dim
        log("retrieval head (dim %d) continued from %s" % (dim, args.init))
    log("init %s: %s" % (args.init, json.dumps(cfg.to_dict())))

    res = dict(init=args.init, args=vars(args))
    T = args.seq
    if args.ppl_before:
        ppl0 = args.ppl_before
    else:
        ppl0, nch, _ = ppl_llama_protocol(model, vppl, args.ppl_ctx, dev, args.ppl_chunks)
        log("held-out ppl before (n_ctx %d, %d chunks): %.3f" % (args.ppl_ctx, nch, ppl0))
        res["answers_before"] = eval_answers(model, beval, vt, T, dev, n=args.eval_n)
        res["answers_before"].update(eval_answers(model, beval, vt, T, dev, n=args.eval_n, engine=True))
        log("answers before", json.dumps(res["answers_before"]))
    res["ppl_before"] = ppl0

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "sink" not in n]
    nodecay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "sink" not in n)]
    kw = dict(betas=(0.9, 0.95), eps=1e-8)
    if dev.type == "cuda":
        kw["fused"] = True
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1, "lr": args.lr, "base": args.lr},
                             {"params": nodecay, "weight_decay": 0.0, "lr": args.lr, "base": args.lr},
                             {"params": list(head.parameters()), "weight_decay": 0.0,
                              "lr": args.head_lr, "base": args.head_lr}], **kw)
    batcher = MemoryBatcher(tr, btrain, T, args.batch, args.p_mem, args.p_qa, args.seed, args.max_q,
                            args.hard, args.p_win, args.p_src)
    batcher.qa_weight = args.qa_weight
    batcher.prompt_weight = args.prompt_weight
    import model as model_mod
    fwd, masks = model, {}

    def step_fn(x, w, meta, am=None):
        x, w = x.to(dev, non_blocking=True), w.to(dev, non_blocking=True)
        mem = None
        if args.p_src > 0:   # always passed, so that torch.compile makes one graph
            mem = batch_mem(model, meta, tr, batcher.nprng, x.shape[0], x.shape[1] - 1, dev, args.src_grad)
        cap = {"grad": True} if args.copy_loss > 0 else None
        with autocast(dev):
            logits, hidden = fwd(x[:, :-1], masks, return_hidden=True, capture=cap, mem=mem)
        ce = F.cross_entropy(logits.float().reshape(-1, cfg.vocab), x[:, 1:].reshape(-1), reduction="none")
        lm = (ce * w.reshape(-1)).sum() / w.sum()
        rl, racc = retrieval_loss(head, hidden.float(), meta, args.tau)
        loss = lm + (args.ret_weight * rl if rl is not None else 0.0)
        if args.ans_loss > 0 and am is not None:
            am = am.to(dev, non_blocking=True).reshape(-1)
            loss = loss + args.ans_loss * (ce * am).sum() / am.sum().clamp(min=1.0)
        copy_w = 0.0
        if cap is not None:
            cl, copy_w = copy_loss(model, cap, meta, x.shape[1] - 1)
            if cl is not None:
                loss = loss + args.copy_loss * cl
        step_fn.copy_w = copy_w
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()) + list(head.parameters()), 1.0)
        opt.step()
        return lm.item(), (rl.item() if rl is not None else float("nan")), racc

    # flex attention (block-sparse windows) under torch.compile when it works, else SDPA
    modes = [("flex", True), ("sdpa", True), ("sdpa", False)] if dev.type == "cuda" else [("ref", False)]
    first = batcher.next() + (batcher.last_answer_mask,)
    init_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for i, (impl, comp) in enumerate(modes):
        model_mod.IMPL["cuda"] = "flex" if impl == "flex" else "sdpa"
        masks = model.flex_masks(T, dev) if impl == "flex" else {}
        fwd = torch.compile(model) if (comp and args.compile) else model
        try:
            t_c = time.time()
            step_fn(*first)
            log("attention %s, compile %s: first step %.1fs" % (impl, comp, time.time() - t_c))
            break
        except Exception as e:  # noqa: BLE001
            if i == len(modes) - 1:
                raise
            log("mode %s/%s failed (%s: %s)" % (impl, comp, type(e).__name__, str(e)[:300]))
            model.load_state_dict(init_state)
            opt.state.clear()
    budget = args.minutes * 60.0
    t0 = time.time()
    step, hist = 1, []
    while True:
        el = time.time() - t0
        frac = (step / args.steps) if args.steps else (el / budget)
        if frac >= 1.0:
            break
        for g in opt.param_groups:
            g["lr"] = g["base"] * min(1.0, (step + 1) / args.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        lm, rl, racc = step_fn(*batcher.next(), batcher.last_answer_mask)
        step += 1
        if step % 25 == 0 or step == 1:
            cw = getattr(step_fn, "copy_w", 0.0)
            log("step %d %.0fs lm %.4f ret %.4f ret-acc %.2f copy-w %.3f" % (step, time.time() - t0, lm, rl, racc, cw))
            hist.append(dict(step=step, sec=round(time.time() - t0, 1), lm=round(lm, 4), ret=round(rl, 4), ret_acc=racc,
                             copy_weight=round(cw, 4)))
    res["steps"], res["train_seconds"], res["history"] = step, round(time.time() - t0, 1), hist
    res["tokens_seen"] = step * args.batch * T
    model.eval()
    state = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    # export first: whatever the evaluations below cost, the model is on disk
    gg = os.path.join(args.out, "model.gguf")
    extra = {"channel.retrieval.dim": (args.ret_dim, "u32"),
             "channel.retrieval.query": (head.q.weight.detach().float().cpu().numpy().reshape(-1).tolist(), "f32"),
             "channel.retrieval.key": (head.k.weight.detach().float().cpu().numpy().reshape(-1).tolist(), "f32")}
    res["gguf_bytes"] = export_gguf.export(cfg, state, gg, args.gguf_type, args.tokenizer,
                                           name="channel-" + cfg.arch + "-memory", extra=extra)
    log("exported %s" % gg)
    if args.copy_to:
        os.makedirs(args.copy_to, exist_ok=True)
        with open(gg, "rb") as f:
            for i, piece in enumerate(iter(lambda: f.read(16_000_000), b"")):
                with open(os.path.join(args.copy_to, "%s.gguf.part-a%s" % (args.copy_name, "abcdefghij"[i])), "wb") as g:
                    g.write(piece)
        log("copied to %s" % args.copy_to)

    def save():
        for d, name in ((args.out, "results.json"), (args.copy_to, args.copy_name + ".results.json")):
            if d:
                with open(os.path.join(d, name), "w") as f:
                    json.dump(res, f, indent=1)
    save()
    ppl1, _, _ = ppl_llama_protocol(model, vppl, args.ppl_ctx, dev, args.ppl_chunks)
    res["ppl_after"] = ppl1
    log("held-out ppl after: %.3f (before %.3f, %+.2f %%)" % (ppl1, ppl0, 100 * (ppl1 / ppl0 - 1)))
    save()
    res["answers_after"] = eval_answers(model, beval, vt, T, dev, n=args.eval_n)
    res["answers_after"].update(eval_answers(model, beval, vt, T, dev, n=args.eval_n, engine=True))
    log("answers after", json.dumps(res["answers_after"]))
    save()
    res["retrieval"] = eval_retrieval(model, head, beval, vt if len(vt) > args.eval_tokens + 2000 else tr, dev,
                                      args.eval_facts, args.eval_tokens)
    log("retrieval", json.dumps(res["retrieval"]))
    save()
    cfg2, sd2 = export_gguf.load(gg)
    m2 = Model(cfg2)
    m2.load_state_dict(sd2)
    m2.to(dev)
    res["answers_gguf"] = eval_answers(m2, beval, vt, T, dev, n=args.eval_n)
    res["answers_gguf"].update(eval_answers(m2, beval, vt, T, dev, n=args.eval_n, engine=True))
    p2, _, _ = ppl_llama_protocol(m2, vppl, args.ppl_ctx, dev, args.ppl_chunks)
    res["ppl_gguf"] = p2
    log("GGUF ppl %.3f answers %s" % (p2, json.dumps(res["answers_gguf"])))
    save()
    log("done")


if __name__ == "__main__":
    main()
