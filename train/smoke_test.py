#!/usr/bin/env python3
"""CPU smoke test of Channel's training pipeline (Debian python3-torch).

Runs in well under 2 minutes on 2 cores:
  1. writes a small generated English-like corpus, tokenizes it with the
     committed tokenizer (train/tokenizer/spm.model) and builds recall banks;
  2. trains tiny gemma3 and tiny bounded models for a few dozen steps on the
     CPU through train.py (loss must fall), which exports F32 GGUFs and
     evaluates them (the GGUF read back must give the same perplexity);
  3. checks the bounded (swa_sink_v1) attention of the PyTorch model against
     an independent per-token implementation of the served operator: a ring of
     the last W raw (unrotated) keys, the query rotated by the distance
     t - j, S NoPE sinks scored with the unrotated query, one softmax;
  4. checks the GGUF files' metadata and tensor shapes.
Exits non-zero on any failure.  Prints 'N passed, N failed'.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PASSED, FAILED = [], []


def check(name, cond, detail=""):
    (PASSED if cond else FAILED).append(name)
    print("%s %s %s" % ("PASS" if cond else "FAIL", name, detail), flush=True)


def make_text(seed, n):
    rng = random.Random(seed)
    subj = ["The old man", "A young woman", "The engineer", "My neighbour", "The teacher", "The small dog",
            "The river", "Every child", "The committee", "The ship"]
    verb = ["walked to", "looked at", "talked about", "remembered", "built", "carried", "found", "described"]
    obj = ["the bridge", "a quiet garden", "the long road", "the new library", "an open window",
           "the morning train", "the broken clock", "a letter from home"]
    tail = ["before the rain began.", "and then went home.", "with great care.", "in the evening.",
            "because it was late.", "while the others waited."]
    docs = []
    for _ in range(n):
        sents = ["%s %s %s %s" % (rng.choice(subj), rng.choice(verb), rng.choice(obj), rng.choice(tail))
                 for _ in range(rng.randint(8, 30))]
        docs.append(" ".join(sents))
    return docs


SMOKE_VOCAB = 400


def build_data(d):
    """Generated text, a small tokenizer trained on it (same options as the
    real one, 400 pieces, so the tiny models stay cheap), ids and recall banks."""
    import numpy as np
    import sentencepiece as spm
    import tokenize_corpus as tc
    real = spm.SentencePieceProcessor(model_file=os.path.join(HERE, "tokenizer", "spm.model"))
    check("committed tokenizer layout", real.get_piece_size() == 8192 and real.id_to_piece(0) == "<pad>" and
          real.id_to_piece(1) == "<eos>" and real.id_to_piece(2) == "<bos>" and real.id_to_piece(3) == "<unk>" and
          real.id_to_piece(4) == "<0x00>" and real.id_to_piece(259) == "<0xFF>")
    with open(os.path.join(d, "tok.txt"), "w") as f:
        for doc in make_text(7, 200):
            f.write(doc.replace(". ", ".\n") + "\n")
        rng = random.Random(3)
        for _ in range(300):
            f.write("\n".join(tc.make_example(rng)) + "\n")
    spm.SentencePieceTrainer.train(
        input=os.path.join(d, "tok.txt"), model_prefix=os.path.join(d, "spm"), model_type="bpe",
        vocab_size=SMOKE_VOCAB, byte_fallback=True, pad_id=0, eos_id=1, bos_id=2, unk_id=3,
        pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>",
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=False,
        split_digits=True, allow_whitespace_only_pieces=True, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(d, "spm.model"))
    for split, seed, n in (("train", 1, 300), ("valid", 2, 20)):
        ids = []
        docs = make_text(seed, n)
        for doc in docs:
            ids += [2] + sp.encode(doc) + [1]
        np.asarray(ids, np.uint16).tofile(os.path.join(d, split + ".bin"))
        if split == "valid":
            plain = "\n\n".join(docs) + "\n"
            np.asarray([2] + sp.encode(plain), np.uint16).tofile(os.path.join(d, "valid_ppl.bin"))
    np.savez_compressed(os.path.join(d, "recall_train.npz"), **tc.make_recall_bank(sp, 200, 1))
    np.savez_compressed(os.path.join(d, "recall_eval.npz"), **tc.make_recall_bank(sp, 50, 2))


def run_train(d, preset, out):
    cmd = [sys.executable, os.path.join(HERE, "train.py"), "--preset", preset, "--device", "cpu", "--data", d,
           "--out", out, "--steps", "40", "--seq", "128", "--batch", "8", "--recall-n", "8", "--samples", "0", "--lr", "3e-3", "--warmup", "5",
           "--ppl-ctx", "128", "--dmin", "20", "--dmax", "100", "--gguf-type", "f32", "--p-recall", "0.5",
           "--vocab", str(SMOKE_VOCAB), "--tokenizer", os.path.join(d, "spm.model")]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900, env=env)
    text = r.stdout.decode("utf-8", "replace")
    if r.returncode != 0:
        print(text[-3000:])
    return r.returncode, text


def bounded_reference_check(gguf):
    """Per-token swa_sink_v1 operator (as served) vs the PyTorch training form."""
    import math
    import numpy as np
    import torch
    import export_gguf
    from model import Model, rope_cache, apply_rope
    cfg, sd = export_gguf.load(gguf)
    m = Model(cfg)
    m.load_state_dict(sd)
    m.eval()
    T = 40
    ids = torch.tensor([[2] + [random.Random(3).randrange(4, cfg.vocab) for _ in range(T - 1)]])
    il = next(i for i in range(cfg.n_layer) if cfg.layer_types[i] == 0)
    blk = m.blocks[il]
    torch.manual_seed(0)
    h = torch.randn(1, T, cfg.d)
    with torch.no_grad():
        ref = blk.attn(h, m.rope_for(il, T, h.device), {})[0].double().numpy()
        hd, H, KV, W, S, rd = cfg.head_dim, cfg.n_head, cfg.n_kv, cfg.window, cfg.sinks, cfg.rd
        q = blk.q_norm(blk.wq(h).view(1, T, H, hd))[0].double().numpy()       # [T,H,hd] q-hat
        k = blk.k_norm(blk.wk(h).view(1, T, KV, hd))[0].double().numpy()      # raw k-hat (unrotated)
        v = blk.wv(h).view(1, T, KV, hd)[0].double().numpy()
        sk = blk.sink_k.double().numpy()                                      # [KV,S,hd], no k_norm
        sv = blk.sink_v.double().numpy()
        wo = blk.wo.weight.double().numpy()
    inv = 1.0 / (cfg.rope_base ** (np.arange(0, rd, 2) / rd))

    def rot(x, delta):  # NEOX rotation of the first rd dims by angle delta*inv
        y = x.copy()
        c, s = np.cos(delta * inv), np.sin(delta * inv)
        a, b = x[:rd // 2], x[rd // 2:rd]
        y[:rd // 2] = a * c - b * s
        y[rd // 2:rd] = b * c + a * s
        return y

    ring_k = np.zeros((KV, W, hd))
    ring_v = np.zeros((KV, W, hd))
    out = np.zeros((T, H * hd))
    for t in range(T):
        ring_k[:, t % W] = k[t]
        ring_v[:, t % W] = v[t]
        n = min(t + 1, W)
        for hh in range(H):
            g = hh // (H // KV)
            sc, vals = [], []
            for s_ in range(S):
                sc.append(q[t, hh] @ sk[g, s_] / math.sqrt(hd))
                vals.append(sv[g, s_])
            for j in range(t - n + 1, t + 1):
                sc.append(rot(q[t, hh], t - j) @ ring_k[g, j % W] / math.sqrt(hd))
                vals.append(ring_v[g, j % W])
            sc = np.array(sc)
            p = np.exp(sc - sc.max())
            p /= p.sum()
            out[t, hh * hd:(hh + 1) * hd] = p @ np.array(vals)
    got = out @ wo.T
    err = float(np.abs(got - ref).max())
    check("bounded operator (ring + relative query rotation + sinks) == training form", err < 1e-4, "max abs %.2e" % err)


def main():
    try:
        import torch  # noqa: F401
        import numpy  # noqa: F401
        import sentencepiece  # noqa: F401
    except ImportError as e:
        print("=" * 70)
        print("SKIP train/smoke_test.py: %s. Install the packages in train/apt-packages.txt" % e)
        print("=" * 70)
        return 0
    import torch
    torch.set_num_threads(1)
    from gguf_writer import read_gguf
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "tokens")
        os.makedirs(data)
        build_data(data)
        # missing data must fail clearly
        rc = subprocess.run([sys.executable, os.path.join(HERE, "train.py"), "--preset", "tiny-gemma3", "--device", "cpu",
                             "--data", os.path.join(d, "nothing"), "--out", os.path.join(d, "x"), "--steps", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT).returncode
        check("train.py refuses a missing corpus", rc != 0)
        for preset in ("tiny-gemma3", "tiny-bounded"):
            out = os.path.join(d, preset)
            rc, text = run_train(data, preset, out)
            check(preset + " trains", rc == 0)
            if rc != 0:
                continue
            res = json.load(open(os.path.join(out, "results.json")))
            h = res["history"]
            l0, l1 = res["initial_loss"], h[-1]["train_loss"]
            check(preset + " loss falls", l1 < l0 - 1.0, "%.3f -> %.3f" % (l0, l1))
            pt, pg = res["ppl_torch"]["128"]["ppl"], res["ppl_gguf"]["128"]["ppl"]
            check(preset + " GGUF ppl == torch ppl", abs(pt - pg) / pt < 1e-3, "%.4f vs %.4f" % (pt, pg))
            meta, tens = read_gguf(os.path.join(out, "model.gguf"))
            arch = meta["general.architecture"]
            check(preset + " arch", arch == ("gemma3" if "gemma3" in preset else "bounded"))
            check(preset + " tokenizer", meta["tokenizer.ggml.model"] == "llama" and
                  meta["tokenizer.ggml.tokens"][:5] == ["<pad>", "<eos>", "<bos>", "<unk>", "<0x00>"])
            if arch == "bounded":
                cfg = res["config"]
                ne = tens["blk.0.attn_sink_k.weight"][0]
                check("sink tensor ne = [head_dim, S, n_kv]", ne == [cfg["head_dim"], cfg["sinks"], cfg["n_kv"]], str(ne))
                check("global layer has no sinks", "blk.1.attn_sink_k.weight" not in tens)
                check("layer_types key", meta["bounded.attention.layer_types"] == cfg["layer_types"])
                bounded_reference_check(os.path.join(out, "model.gguf"))
    print("%d passed, %d failed" % (len(PASSED), len(FAILED)))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
