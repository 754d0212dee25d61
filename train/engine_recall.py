"""Tier 3 as the engine builds it, for training and evaluation.

The engine stores an episode when its span leaves the window of a running stream: its K/V were
computed there, with whatever text preceded it in that window (docs/memory.md).  A recall puts
those K/V, re-rotated to their virtual positions, between the anchors and the window of the
global layers; the sliding layers never see them.  Training with the episodes' tokens written
into the row (finetune_memory.py's first layout) teaches a model to read K/V computed right
after <bos> and other episodes, which is not what the engine hands it: such a model answers
from an episode made by `channel mem add` (its own short context) and misses the same tokens
stored from a stream.

Here an episode is encoded inside a source row, [<bos>] + corpus text with the episode written
at a random place (0 to ~2,000 tokens of context before it), and its global layers' pre-RoPE
K/V and final hidden states are kept.  A training row then carries, at the tier-3 positions,
plain text that precedes its window (what the sliding layers of the engine see before the
window: earlier text of the same stream), and the global layers use the kept K/V there
(model.Model's `mem`).
"""
import numpy as np
import torch

BOS = 2


def encode_in_context(model, episodes, corpus, nprng, device, src_len=2048, per_row=4, batch=16,
                      autocast=None, grad=False):
    """Each episode (1-D int array, <= src_len / per_row tokens) encoded after a random stretch
    of corpus text.  Returns, per episode, ({layer: (k, v) [kv_heads, n, head_dim]}, hidden
    [n, d]) on `device`, in float32.  grad=True keeps the graph: a loss on the row that reads
    these K/V then also trains how the model writes an episode inside a stream."""
    with torch.set_grad_enabled(bool(grad)):
        return _encode_in_context(model, episodes, corpus, nprng, device, src_len, per_row, batch,
                                  autocast, grad)


def _encode_in_context(model, episodes, corpus, nprng, device, src_len, per_row, batch, autocast, grad):
    globals_ = [il for il in range(model.cfg.n_layer) if model.cfg.is_global(il)]
    seg = (src_len - 1) // per_row
    out = [None] * len(episodes)
    # in the model's own mode (in training: with dropout, as every other state of the batch)
    for b0 in range(0, len(episodes), per_row * batch):
        group = list(range(b0, min(len(episodes), b0 + per_row * batch)))
        rows, where = [], []
        for r0 in range(0, len(group), per_row):
            s = int(nprng.integers(0, len(corpus) - src_len - 1))
            row = np.concatenate([[BOS], corpus[s:s + src_len - 1].astype(np.int64)])
            for j, e in enumerate(group[r0:r0 + per_row]):
                ep = episodes[e]
                n = len(ep)
                assert n <= seg, "episode longer than a source segment"
                at = 1 + j * seg + int(nprng.integers(0, seg - n + 1))
                row[at:at + n] = ep
                where.append((len(rows), at, n, e))
            rows.append(row)
        x = torch.from_numpy(np.stack(rows)).to(device)
        cap = {"grad": True} if grad else {}
        if autocast is not None:
            with autocast(device):
                _, h = model(x, return_hidden=True, capture=cap)
        else:
            _, h = model(x, return_hidden=True, capture=cap)
        for (r, at, n, e) in where:
            kv = {il: (cap[il][1][r, :, at:at + n].float(), cap[il][2][r, :, at:at + n].float())
                  for il in globals_}
            out[e] = (kv, h[r, at:at + n].float())
        cap.clear()
    return out


def place(model, rows_spans, encoded, B, T, device):
    """The `mem` argument of model.Model for a batch: rows_spans[r] lists (start, n, episode
    index) of the tier-3 positions of row r (empty: the row has no recalled K/V)."""
    cfg = model.cfg
    globals_ = [il for il in range(cfg.n_layer) if cfg.is_global(il)]
    kv = {il: (torch.zeros(B, cfg.n_kv, T, cfg.head_dim, device=device),
               torch.zeros(B, cfg.n_kv, T, cfg.head_dim, device=device)) for il in globals_}
    sel = torch.zeros(B, 1, T, 1, dtype=torch.bool, device=device)
    for r, spans in enumerate(rows_spans):
        for (st, n, e) in spans:
            ekv = encoded[e][0]
            n = min(n, T - st)
            if n <= 0:
                continue
            for il in globals_:
                kv[il][0][r, :, st:st + n] = ekv[il][0][:, :n]
                kv[il][1][r, :, st:st + n] = ekv[il][1][:, :n]
            sel[r, 0, st:st + n, 0] = True
    return {"sel": sel, "kv": kv}
