#!/usr/bin/env bash
# `logits`, `info`, `perplexity` and `mkmodel`: outputs on generated models and on the
# testdata goldens, determinism of mkmodel, and one-line errors for bad input.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
for cmd in logits info perplexity mkmodel; do
  require_command "$cmd"
done
command -v python3 >/dev/null || skip_test "python3 is needed to check JSON output"

# --- mkmodel: small models of both architectures, deterministic ------------------------
llama="$TMP/llama.gguf"
gemma="$TMP/gemma.gguf"
expect_ok "mkmodel llama q8_0" "$CHANNEL" mkmodel --arch llama --type q8_0 --seed 7 \
  --hidden 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 16 --ffn 96 --vocab 400 -o "$llama"
expect_ok "mkmodel gemma3 f16" "$CHANNEL" mkmodel --arch gemma3 --type f16 --seed 7 \
  --hidden 64 --layers 3 --heads 2 --kv-heads 1 --head-dim 32 --ffn 64 --window 8 --vocab 300 \
  -o "$gemma"
expect_ok "mkmodel again" "$CHANNEL" mkmodel --arch llama --type q8_0 --seed 7 \
  --hidden 64 --layers 2 --heads 4 --kv-heads 2 --head-dim 16 --ffn 96 --vocab 400 -o "$TMP/again.gguf"
cmp -s "$llama" "$TMP/again.gguf" || fail "mkmodel with the same flags wrote different bytes"

# --- info ------------------------------------------------------------------------------
if expect_ok "info gemma3" "$CHANNEL" info -m "$gemma"; then
  python3 - "$TMP/out" <<'PY' || fail "info output: $(head -c 600 "$TMP/out")"
import json, sys
d = json.load(open(sys.argv[1]))
h = d["hparams"]
assert d["architecture"] == "gemma3", d
assert (h["n_vocab"], h["n_embd"], h["n_layer"], h["n_head"], h["n_head_kv"]) == (300, 64, 3, 2, 1), h
assert h["sliding_window"] == 8 and h["rope_style"] == "neox", h
assert d["n_tensors"] == 2 + 3 * 13, d["n_tensors"]
assert set(d["tensor_types"]) == {"f16", "f32"}, d["tensor_types"]
PY
fi

# --- logits ----------------------------------------------------------------------------
if expect_ok "logits" "$CHANNEL" logits -m "$llama" --ids 2,300,301 --top 5 --dump "$TMP/l.f32"; then
  python3 - "$TMP/out" "$TMP/l.f32" <<'PY' || fail "logits output: $(head -c 600 "$TMP/out")"
import json, struct, sys
d = json.load(open(sys.argv[1]))
raw = open(sys.argv[2], "rb").read()
assert d["n_vocab"] == 400 and len(raw) == 400 * 4, (d["n_vocab"], len(raw))
dump = struct.unpack("<400f", raw)
top = d["top"]
assert len(top) == 5
best = sorted(range(400), key=lambda i: (-dump[i], i))[:5]
assert [t[0] for t in top] == best, (top, best)
assert all(abs(t[1] - dump[t[0]]) < 1e-6 for t in top)
PY
fi

# The goldens: the first of llama.cpp's top-10 for gemma3-micro-f32 / seq7.
if [[ -n "$TESTDATA" && -f "$TESTDATA/MANIFEST.json" ]]; then
  g="$TESTDATA/goldens/gemma3-micro-f32/seq7"
  if expect_ok "logits on the seq7 golden" "$CHANNEL" logits -m "$TESTDATA/models/gemma3-micro-f32.gguf" \
    --ids 2,2292,845,199,3027,2444,517 --top 10 --dump "$TMP/g.f32"; then
    python3 - "$TMP/out" "$TMP/g.f32" "$g.logits.f32" "$g.top10.json" <<'PY' || fail "seq7 golden"
import json, struct, sys
d = json.load(open(sys.argv[1]))
mine = struct.unpack("<4096f", open(sys.argv[2], "rb").read())
want = struct.unpack("<4096f", open(sys.argv[3], "rb").read())
assert max(abs(a - b) for a, b in zip(mine, want)) <= 2e-3
assert d["top"][0][0] == json.load(open(sys.argv[4]))["top10"][0]["id"]
PY
  fi
fi

# --- perplexity ------------------------------------------------------------------------
python3 -c "
import random
random.seed(3)
w = 'the cat sat on a mat and dog ran far away from home'.split()
print(' '.join(random.choice(w) for _ in range(400)))" >"$TMP/text.txt"
if expect_ok "perplexity" "$CHANNEL" perplexity -m "$gemma" -f "$TMP/text.txt" --ctx 32; then
  python3 - "$TMP/out" <<'PY' || fail "perplexity output: $(cat "$TMP/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tokens"] > 0 and d["tokens"] % 15 == 0, d  # 32 - 16 - 1 scored per chunk
assert 1.0 < d["ppl"] < 1e6, d
PY
fi

# --- bad input: one line on stderr, non-zero exit --------------------------------------
expect_error "logits: non-numeric id" "ids.*x" "$CHANNEL" logits -m "$llama" --ids 2,x
expect_error "logits: id outside the vocabulary" "400.*vocab" "$CHANNEL" logits -m "$llama" --ids 2,400
expect_error "logits: non-numeric --top" "top" "$CHANNEL" logits -m "$llama" --ids 2 --top many
expect_error "logits: unknown flag" "--bogus|extra" "$CHANNEL" logits -m "$llama" --ids 2 --bogus
expect_error "logits: missing file" "no such file|cannot open|not found" "$CHANNEL" logits -m "$TMP/none.gguf" --ids 2
head -c 1000 /dev/urandom >"$TMP/garbage.gguf"
expect_error "info: garbage file" "garbage.gguf" "$CHANNEL" info -m "$TMP/garbage.gguf"
head -c 5000 "$llama" >"$TMP/truncated.gguf"
expect_error "info: truncated file" "truncated.gguf" "$CHANNEL" info -m "$TMP/truncated.gguf"
expect_error "mkmodel: bad type" "type" "$CHANNEL" mkmodel --arch llama --type q5_k -o "$TMP/x.gguf"
expect_error "mkmodel: bad arch" "arch" "$CHANNEL" mkmodel --arch mamba -o "$TMP/x.gguf"
expect_error "mkmodel: tiny vocab" "vocab" "$CHANNEL" mkmodel --arch llama --vocab 10 -o "$TMP/x.gguf"
expect_error "mkmodel: non-numeric hidden" "hidden" "$CHANNEL" mkmodel --arch llama --hidden big -o "$TMP/x.gguf"
expect_error "mkmodel: unaligned q8_0 hidden" "hidden.*32" "$CHANNEL" mkmodel --arch llama --type q8_0 --hidden 40 -o "$TMP/x.gguf"
echo "short text" >"$TMP/short.txt"
expect_error "perplexity: text too short" "needs at least" "$CHANNEL" perplexity -m "$gemma" -f "$TMP/short.txt" --ctx 32
expect_error "perplexity: missing text" "none.txt" "$CHANNEL" perplexity -m "$gemma" -f "$TMP/none.txt"
expect_error "perplexity: --ctx 2" "ctx" "$CHANNEL" perplexity -m "$gemma" -f "$TMP/text.txt" --ctx 2
finish
