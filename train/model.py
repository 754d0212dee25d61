"""PyTorch models for Channel: `gemma3` and `bounded` (swa_sink_v1).

Both share one block (Gemma 3 layout):
    x = embed(ids) * sqrt(d)
    per layer:  h = attn_norm(x); q,k,v = Wq h, Wk h, Wv h
                q = q_norm(q), k = k_norm(k)   (per head, over head_dim)
                rope (NEOX, first rd dims of each head)
                a = attention(q, k, v) with scale 1/sqrt(head_dim)
                x = x + post_attention_norm(Wo a)
                x = x + post_ffw_norm(down(gelu_tanh(gate h2) * up h2)), h2 = ffn_norm(x)
    logits = embed.weight @ output_norm(x)      (tied)
RMSNorm is x / sqrt(mean(x^2) + eps) * (1 + w); the GGUF stores 1 + w.

gemma3: layer il is global iff il % 6 == 5 (rope base rope_global, plain causal),
        otherwise sliding (rope base rope_local, sees keys p - k < window).
bounded: layer_types[il] == 0 -> swa_sink_v1: the query at t sees keys
        j in (t - W, t] with absolute RoPE (rd dims) plus S learned NoPE sink
        keys/values per KV head, scored against the *unrotated* normalised
        query; one softmax over sinks and window.  Sink keys are used as stored
        (they do NOT pass through attn_k_norm).  layer_types[il] == 1 -> global
        causal softmax, same rope, no sinks.
"""
import math
from dataclasses import asdict, dataclass, field
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


@dataclass
class Config:
    arch: str = "gemma3"          # "gemma3" | "bounded"
    vocab: int = 8192
    d: int = 384
    n_layer: int = 12
    n_head: int = 6
    n_kv: int = 2
    head_dim: int = 64
    ffn: int = 1536
    eps: float = 1e-6
    ctx: int = 2048               # context_length written to the GGUF
    # gemma3
    window: int = 512             # sliding window (gemma3) or W (bounded)
    swa_pattern: int = 6
    rope_global: float = 1e6
    rope_local: float = 1e4
    # bounded
    sinks: int = 4
    rd: int = 32
    rope_base: float = 1e4
    layer_types: List[int] = field(default_factory=list)
    dropout: float = 0.0          # training only (residual branches); not in the GGUF

    def is_global(self, il):
        if self.arch == "gemma3":
            return il % self.swa_pattern == self.swa_pattern - 1
        return self.layer_types[il] == 1

    def rope(self, il):
        """(rotary dims, base) of layer il."""
        if self.arch == "gemma3":
            return self.head_dim, (self.rope_global if self.is_global(il) else self.rope_local)
        return self.rd, self.rope_base

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(n))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * (1.0 + self.w.float())).type_as(x)


def rope_cache(T, rd, base, device):
    inv = 1.0 / (base ** (torch.arange(0, rd, 2, dtype=torch.float64, device=device) / rd))
    ang = torch.arange(T, dtype=torch.float64, device=device)[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()   # [T, rd/2]


def apply_rope(x, cos, sin, rd):
    """NEOX rotation of the first rd dims: dim i pairs with i + rd/2.  x: [B, H, T, hd]."""
    half = rd // 2
    x1, x2, rest = x[..., :half], x[..., half:rd], x[..., rd:]
    c, s = cos[None, None].to(x.dtype), sin[None, None].to(x.dtype)
    y1 = x1 * c - x2 * s
    y2 = x2 * c + x1 * s
    return torch.cat([y1, y2, rest], dim=-1)


_mask_cache = {}


def window_mask(T, W, S, device):
    """Boolean [T, S + T]: True = may attend.  First S columns are sinks."""
    key = (T, W, S, str(device))
    m = _mask_cache.get(key)
    if m is None:
        i = torch.arange(T, device=device)[:, None]
        j = torch.arange(T, device=device)[None, :]
        win = (j <= i) & (i - j < W)
        m = torch.cat([torch.ones(T, S, dtype=torch.bool, device=device), win], dim=1) if S else win
        _mask_cache[key] = m
    return m


def attention_ref(q, k, v, mask, scale):
    """Plain softmax attention.  q [B,H,T,e], k [B,H,N,e], v [B,H,N,dv], mask [T,N] bool."""
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p, v.float()).type_as(q)


# attention implementation on CUDA: "flex" (block-sparse, needs torch.compile to be
# fast) or "sdpa" (fused kernels with a dense boolean mask).  train.py picks.
IMPL = {"cuda": "sdpa"}


def _flex_mask(T, W, S, N, device):
    from torch.nn.attention.flex_attention import create_block_mask

    def mask_mod(b, h, qi, kj):
        j = kj - S
        win = (j >= 0) & (j <= qi) & (qi - j < W)
        return (kj < S) | win
    return create_block_mask(mask_mod, B=None, H=None, Q_LEN=T, KV_LEN=N, device=device)


def padded_keys(T, S, mult):
    return (S + T + mult - 1) // mult * mult


def attend(q, k, v, mask, scale, causal, flex=None):
    if q.is_cuda and HAS_SDPA:
        if causal:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
        if flex is not None:
            from torch.nn.attention.flex_attention import flex_attention
            return flex_attention(q, k, v, block_mask=flex, scale=scale)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    return attention_ref(q, k, v, mask, scale)


class Block(nn.Module):
    def __init__(self, cfg: Config, il: int):
        super().__init__()
        self.cfg, self.il = cfg, il
        d, hd = cfg.d, cfg.head_dim
        self.attn_norm = RMSNorm(d, cfg.eps)
        self.wq = nn.Linear(d, cfg.n_head * hd, bias=False)
        self.wk = nn.Linear(d, cfg.n_kv * hd, bias=False)
        self.wv = nn.Linear(d, cfg.n_kv * hd, bias=False)
        self.wo = nn.Linear(cfg.n_head * hd, d, bias=False)
        self.q_norm = RMSNorm(hd, cfg.eps)
        self.k_norm = RMSNorm(hd, cfg.eps)
        self.post_attn_norm = RMSNorm(d, cfg.eps)
        self.ffn_norm = RMSNorm(d, cfg.eps)
        self.gate = nn.Linear(d, cfg.ffn, bias=False)
        self.up = nn.Linear(d, cfg.ffn, bias=False)
        self.down = nn.Linear(cfg.ffn, d, bias=False)
        self.post_ffw_norm = RMSNorm(d, cfg.eps)
        self.is_global = cfg.is_global(il)
        self.rd, self.base = cfg.rope(il)
        self.has_sinks = cfg.arch == "bounded" and not self.is_global and cfg.sinks > 0
        if self.has_sinks:
            # [n_kv][S][head_dim]; used as is (no k_norm, no rope)
            self.sink_k = nn.Parameter(torch.randn(cfg.n_kv, cfg.sinks, hd) * 0.5)
            self.sink_v = nn.Parameter(torch.zeros(cfg.n_kv, cfg.sinks, hd))

    def attn(self, h, rope, masks, capture=None, mem=None):
        cfg = self.cfg
        B, T, _ = h.shape
        hd, H, KV = cfg.head_dim, cfg.n_head, cfg.n_kv
        q = self.q_norm(self.wq(h).view(B, T, H, hd)).transpose(1, 2)
        k = self.k_norm(self.wk(h).view(B, T, KV, hd)).transpose(1, 2)
        v = self.wv(h).view(B, T, KV, hd).transpose(1, 2)
        if mem is not None and self.is_global:
            # recalled K/V, computed elsewhere (the episode's own stream context), placed at the
            # positions mem["sel"] marks: what the engine's tier 3 holds (engine_recall.py)
            sel = mem["sel"]
            ks, vs = mem["kv"][self.il]
            k = torch.where(sel, ks.to(k.dtype), k)
            v = torch.where(sel, vs.to(v.dtype), v)
        if capture is not None and self.is_global:
            if capture.get("grad"):   # a loss reads them (finetune_memory.py's copy loss)
                capture[self.il] = (q, k, v)
            else:
                capture[self.il] = (q.detach(), k.detach(), v.detach())  # pre-RoPE: the position-free frame
        cos, sin = rope
        qr = apply_rope(q, cos[:T], sin[:T], self.rd)
        kr = apply_rope(k, cos[:T], sin[:T], self.rd)
        rep = H // KV
        kr = kr.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scale = 1.0 / math.sqrt(hd)
        use_flex = q.is_cuda and IMPL["cuda"] == "flex"
        if self.is_global:
            o = attend(qr, kr, v, window_mask(T, T, 0, h.device), scale, causal=True)
        elif not self.has_sinks:
            fm = masks.get(("w", T)) if use_flex else None
            o = attend(qr, kr, v, window_mask(T, cfg.window, 0, h.device), scale, causal=False, flex=fm)
        else:
            S = cfg.sinks
            sk = self.sink_k.to(q.dtype).repeat_interleave(rep, dim=0)[None].expand(B, H, S, hd)
            sv = self.sink_v.to(q.dtype).repeat_interleave(rep, dim=0)[None].expand(B, H, S, hd)
            # one softmax: window keys scored with the rotated query, sinks with
            # the unrotated one.  Done as a single attention over concatenated
            # [rotated | unrotated] features so fused kernels can be used.
            z = torch.zeros_like(kr)
            qq = torch.cat([qr, q], dim=-1)
            kk = torch.cat([torch.cat([torch.zeros_like(sk), sk], dim=-1),
                            torch.cat([kr, z], dim=-1)], dim=2)
            vv = torch.cat([sv, v], dim=2)
            mask = window_mask(T, cfg.window, S, h.device)
            if q.is_cuda:
                # pad keys to an aligned count (masked out) and values to the qk width
                N = padded_keys(T, S, 128)
                kk = F.pad(kk, (0, 0, 0, N - S - T))
                vv = F.pad(vv, (0, hd, 0, N - S - T))
                mask = F.pad(mask, (0, N - S - T), value=False)
            fm = masks.get(("s", T)) if use_flex else None
            o = attend(qq, kk, vv, mask, scale, causal=False, flex=fm)[..., :hd]
        o = o.transpose(1, 2).reshape(B, T, H * hd)
        return self.wo(o)

    def forward(self, x, rope, masks, capture=None, mem=None):
        p = self.cfg.dropout if self.training else 0.0
        x = x + F.dropout(self.post_attn_norm(self.attn(self.attn_norm(x), rope, masks, capture, mem)), p,
                          self.training)
        h = self.ffn_norm(x)
        y = self.down(F.gelu(self.gate(h), approximate="tanh") * self.up(h))
        return x + F.dropout(self.post_ffw_norm(y), p, self.training)


class Model(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        if cfg.arch == "bounded":
            assert len(cfg.layer_types) == cfg.n_layer and cfg.rd % 2 == 0 and cfg.rd <= cfg.head_dim
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.d)
        self.blocks = nn.ModuleList([Block(cfg, i) for i in range(cfg.n_layer)])
        self.out_norm = RMSNorm(cfg.d, cfg.eps)
        self._rope = {}
        self.reset_parameters()

    def reset_parameters(self):
        std = 0.02
        nn.init.normal_(self.embed.weight, std=std)
        for b in self.blocks:
            for lin in (b.wq, b.wk, b.wv, b.gate, b.up):
                nn.init.normal_(lin.weight, std=std)
            for lin in (b.wo, b.down):
                nn.init.normal_(lin.weight, std=std / math.sqrt(2 * self.cfg.n_layer))

    def rope_for(self, il, T, device):
        rd, base = self.cfg.rope(il)
        key = (rd, base, T, str(device))
        if key not in self._rope:
            self._rope[key] = rope_cache(max(T, 16), rd, base, device)
        return self._rope[key]

    def flex_masks(self, T, device):
        """Block masks for the flex path; build them outside torch.compile."""
        cfg = self.cfg
        m = {("w", T): _flex_mask(T, cfg.window, 0, T, device)}
        if cfg.arch == "bounded":
            m[("s", T)] = _flex_mask(T, cfg.window, cfg.sinks, padded_keys(T, cfg.sinks, 128), device)
        return m

    def forward(self, ids, masks=None, return_hidden=False, capture=None, mem=None):
        """Logits [B, T, vocab]; with return_hidden also the final-norm hidden states (what the
        LM head reads).  capture: a dict that receives {layer: (q, k, v)} of the global layers,
        after the q/k norms and before RoPE ([B, heads, T, head_dim]); detached unless
        capture["grad"] is true.  mem: {"sel": [B,1,T,1]
        bool, "kv": {layer: (k, v) [B, kv_heads, T, head_dim], pre-RoPE}}: at the selected
        positions the global layers use these K/V instead of their own."""
        B, T = ids.shape
        masks = masks or {}
        x = self.embed(ids) * math.sqrt(self.cfg.d)
        for il, b in enumerate(self.blocks):
            x = b(x, self.rope_for(il, T, ids.device), masks, capture, mem)
        x = self.out_norm(x)
        logits = F.linear(x, self.embed.weight)
        return (logits, x) if return_hidden else logits
