#!/usr/bin/env python3
"""Export a trained Channel model (gemma3 or bounded) to GGUF, and load one back.

Usage: python3 train/export_gguf.py CHECKPOINT.pt OUT.gguf [--type q8_0|f16|f32|bf16]
       [--tokenizer train/tokenizer/spm.model]

The checkpoint is what train.py saves: {"config": Config dict, "model": state_dict}.
Norm weights are written as 1 + w (F32), 1-D tensors and sink tensors stay F32,
2-D weights get --type (token_embd too; it doubles as the tied output).
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gguf_writer import GGUFWriter, read_gguf, tensor_to_numpy  # noqa: E402

TOK_NORMAL, TOK_UNKNOWN, TOK_CONTROL, TOK_USER, TOK_UNUSED, TOK_BYTE = 1, 2, 3, 4, 5, 6


def tokenizer_metadata(w, spm_path):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=spm_path)
    toks, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        toks.append(sp.id_to_piece(i))
        scores.append(float(sp.get_score(i)))
        if sp.is_unknown(i):
            types.append(TOK_UNKNOWN)
        elif sp.is_control(i):
            types.append(TOK_CONTROL)
        elif sp.is_byte(i):
            types.append(TOK_BYTE)
        elif sp.is_unused(i):
            types.append(TOK_UNUSED)
        else:
            types.append(TOK_NORMAL)
    assert toks[:4] == ["<pad>", "<eos>", "<bos>", "<unk>"] and toks[4] == "<0x00>"
    w.add("tokenizer.ggml.model", "llama")
    w.add("tokenizer.ggml.pre", "default")
    w.add("tokenizer.ggml.tokens", toks, "str")
    w.add("tokenizer.ggml.scores", scores, "f32")
    w.add("tokenizer.ggml.token_type", types, "i32")
    w.add("tokenizer.ggml.bos_token_id", 2, "u32")
    w.add("tokenizer.ggml.eos_token_id", 1, "u32")
    w.add("tokenizer.ggml.unknown_token_id", 3, "u32")
    w.add("tokenizer.ggml.padding_token_id", 0, "u32")
    w.add("tokenizer.ggml.add_bos_token", True)
    w.add("tokenizer.ggml.add_eos_token", False)
    w.add("tokenizer.ggml.add_space_prefix", False)
    return len(toks)


def export(cfg, state, path, wtype="q8_0", spm_path=None, name="channel", extra=None):
    """cfg: model.Config; state: state_dict (tensors or numpy); extra: more metadata,
    {key: (value, type name)} (the retrieval head: finetune_memory.py)."""
    def t(key):
        v = state[key]
        return v.detach().float().cpu().numpy() if hasattr(v, "detach") else np.asarray(v, np.float32)

    arch = cfg.arch
    w = GGUFWriter()
    w.add("general.architecture", arch)
    w.add("general.name", name)
    w.add("general.file_type", {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}[wtype], "u32")
    w.add("general.quantization_version", 2, "u32")
    w.add(arch + ".context_length", cfg.ctx, "u32")
    w.add(arch + ".embedding_length", cfg.d, "u32")
    w.add(arch + ".block_count", cfg.n_layer, "u32")
    w.add(arch + ".feed_forward_length", cfg.ffn, "u32")
    w.add(arch + ".attention.head_count", cfg.n_head, "u32")
    w.add(arch + ".attention.head_count_kv", cfg.n_kv, "u32")
    w.add(arch + ".attention.key_length", cfg.head_dim, "u32")
    w.add(arch + ".attention.value_length", cfg.head_dim, "u32")
    w.add(arch + ".attention.layer_norm_rms_epsilon", float(cfg.eps), "f32")
    if arch == "gemma3":
        w.add("gemma3.rope.dimension_count", cfg.head_dim, "u32")
        w.add("gemma3.rope.freq_base", float(cfg.rope_global), "f32")
        w.add("gemma3.rope.freq_base_swa", float(cfg.rope_local), "f32")
        w.add("gemma3.attention.sliding_window", cfg.window, "u32")
        w.add("gemma3.attention.sliding_window_pattern", cfg.swa_pattern, "u32")
    else:
        w.add("bounded.rope.freq_base", float(cfg.rope_base), "f32")
        w.add("bounded.rope.dimension_count", cfg.rd, "u32")
        w.add("bounded.attention.window", cfg.window, "u32")
        w.add("bounded.attention.sink_count", cfg.sinks, "u32")
        w.add("bounded.attention.layer_types", [int(x) for x in cfg.layer_types], "u32")
    if spm_path:
        nv = tokenizer_metadata(w, spm_path)
        assert nv == cfg.vocab, "tokenizer has %d pieces, model %d" % (nv, cfg.vocab)
    for key, (value, type_name) in (extra or {}).items():
        w.add(key, value, type_name)

    def mat(name, key):
        a = t(key)
        kind = wtype if a.shape[-1] % 32 == 0 or wtype in ("f32", "f16", "bf16") else "f16"
        w.add_tensor(name, a, kind)

    def norm(name, key):
        w.add_tensor(name, 1.0 + t(key), "f32")

    mat("token_embd.weight", "embed.weight")
    for i in range(cfg.n_layer):
        p, b = "blk.%d." % i, "blocks.%d." % i
        norm(p + "attn_norm.weight", b + "attn_norm.w")
        mat(p + "attn_q.weight", b + "wq.weight")
        mat(p + "attn_k.weight", b + "wk.weight")
        mat(p + "attn_v.weight", b + "wv.weight")
        mat(p + "attn_output.weight", b + "wo.weight")
        norm(p + "attn_q_norm.weight", b + "q_norm.w")
        norm(p + "attn_k_norm.weight", b + "k_norm.w")
        norm(p + "post_attention_norm.weight", b + "post_attn_norm.w")
        norm(p + "ffn_norm.weight", b + "ffn_norm.w")
        mat(p + "ffn_gate.weight", b + "gate.weight")
        mat(p + "ffn_up.weight", b + "up.weight")
        mat(p + "ffn_down.weight", b + "down.weight")
        norm(p + "post_ffw_norm.weight", b + "post_ffw_norm.w")
        if (b + "sink_k") in state:
            # logical [n_kv][S][head_dim] -> GGUF ne = [head_dim, S, n_kv]
            w.add_tensor(p + "attn_sink_k.weight", t(b + "sink_k"), "f32")
            w.add_tensor(p + "attn_sink_v.weight", t(b + "sink_v"), "f32")
    norm("output_norm.weight", "out_norm.w")
    w.write(path)
    return os.path.getsize(path)


def load(path):
    """GGUF -> (Config, state_dict of torch tensors) that model.Model accepts."""
    import torch
    from model import Config
    meta, tens = read_gguf(path)
    arch = meta["general.architecture"]
    g = lambda k, d=None: meta.get(arch + "." + k, d)  # noqa: E731
    cfg = Config(arch=arch, vocab=len(meta["tokenizer.ggml.tokens"]), d=g("embedding_length"),
                 n_layer=g("block_count"), n_head=g("attention.head_count"),
                 n_kv=g("attention.head_count_kv"), head_dim=g("attention.key_length"),
                 ffn=g("feed_forward_length"), eps=g("attention.layer_norm_rms_epsilon"),
                 ctx=g("context_length"))
    if arch == "gemma3":
        cfg.window = g("attention.sliding_window")
        cfg.swa_pattern = g("attention.sliding_window_pattern", 6)
        cfg.rope_global = g("rope.freq_base")
        cfg.rope_local = g("rope.freq_base_swa", 10000.0)
    else:
        cfg.window = g("attention.window")
        cfg.sinks = g("attention.sink_count")
        cfg.rd = g("rope.dimension_count")
        cfg.rope_base = g("rope.freq_base")
        cfg.layer_types = list(g("attention.layer_types"))
    arr = lambda n: torch.from_numpy(np.array(tensor_to_numpy(*tens[n]), dtype=np.float32))  # noqa: E731
    sd = {"embed.weight": arr("token_embd.weight"), "out_norm.w": arr("output_norm.weight") - 1}
    names = {"attn_norm": "attn_norm.w", "attn_q_norm": "q_norm.w", "attn_k_norm": "k_norm.w",
             "post_attention_norm": "post_attn_norm.w", "ffn_norm": "ffn_norm.w",
             "post_ffw_norm": "post_ffw_norm.w"}
    mats = {"attn_q": "wq.weight", "attn_k": "wk.weight", "attn_v": "wv.weight",
            "attn_output": "wo.weight", "ffn_gate": "gate.weight", "ffn_up": "up.weight",
            "ffn_down": "down.weight"}
    for i in range(cfg.n_layer):
        p, b = "blk.%d." % i, "blocks.%d." % i
        for k, v in names.items():
            sd[b + v] = arr(p + k + ".weight") - 1
        for k, v in mats.items():
            sd[b + v] = arr(p + k + ".weight")
        if p + "attn_sink_k.weight" in tens:
            sd[b + "sink_k"] = arr(p + "attn_sink_k.weight")
            sd[b + "sink_v"] = arr(p + "attn_sink_v.weight")
    return cfg, sd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("out")
    ap.add_argument("--type", default="q8_0", choices=["q8_0", "f16", "f32", "bf16"])
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "tokenizer", "spm.model"))
    args = ap.parse_args()
    import torch
    from model import Config
    if not os.path.isfile(args.checkpoint):
        sys.exit("export_gguf: no checkpoint at " + args.checkpoint)
    ck = torch.load(args.checkpoint, map_location="cpu")
    cfg = Config(**ck["config"])
    n = export(cfg, ck["model"], args.out, args.type, args.tokenizer)
    print("wrote %s (%d bytes)" % (args.out, n))


if __name__ == "__main__":
    main()
