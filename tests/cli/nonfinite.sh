#!/usr/bin/env bash
# A model whose weights hold NaN or Inf: `run` and `perplexity` stop with an error naming the
# first layer whose output is not finite, instead of printing nothing (exit 0) or "ppl -nan".
# The NaNs are written at the offset `channel info` gives for the tensor.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command info
model="$TMP/nan.gguf"
make_micro_model "$model" --type f32
expect_ok "info" "$CHANNEL" info -m "$model"
# poke TENSOR VALUE: overwrites the first 8 floats of TENSOR with VALUE (nan or inf).
poke() {
  python3 - "$TMP/out" "$model" "$1" "$2" <<'PY' || fail "could not poke $1"
import json, struct, sys
info, path, name, value = sys.argv[1:5]
t = {x["name"]: x for x in json.load(open(info))["tensors"]}[name]
assert t["type"] == "f32", t
with open(path, "r+b") as f:
    f.seek(t["offset"])
    f.write(struct.pack("<8f", *([float(value)] * 8)))
PY
}
poke blk.1.ffn_down.weight nan
python3 -c 'print("the quick brown fox jumps over the lazy dog. " * 40)' >"$TMP/text.txt"
expect_exit "run on NaN weights" 1 "$CHANNEL" run -m "$model" -t 1 -n 4 -p "hello there"
grep -q "non-finite.*layer 1" "$TMP/err" || fail "run: the error does not name layer 1: $(cat "$TMP/err")"
expect_exit "run --session on NaN weights" 1 "$CHANNEL" run -m "$model" -t 1 -n 4 -p "hello there" \
  --slots 64 --recall-slots 8 --session "$TMP/s.session"
grep -q "non-finite.*layer 1" "$TMP/err" || fail "run --session: $(cat "$TMP/err")"
expect_exit "perplexity on NaN weights" 1 "$CHANNEL" perplexity -m "$model" -t 1 -f "$TMP/text.txt" --ctx 16
grep -q "non-finite.*layer 1" "$TMP/err" || fail "perplexity: the error does not name layer 1: $(cat "$TMP/err")"

make_micro_model "$model" --type f32
expect_ok "info" "$CHANNEL" info -m "$model"
poke token_embd.weight inf
expect_exit "perplexity on Inf embeddings" 1 "$CHANNEL" perplexity -m "$model" -t 1 -f "$TMP/text.txt" --ctx 16
grep -q "non-finite" "$TMP/err" || fail "perplexity on Inf: $(cat "$TMP/err")"

# A quantized model with a NaN in a norm: the next product's Q8_0 activation blocks would
# round it away and the run would go on with damaged numbers, so the load names the tensor.
"$CHANNEL" mkmodel --arch llama --type q8_0 --hidden 64 --layers 2 --heads 4 --kv-heads 2 \
  --head-dim 16 --ffn 64 --vocab 300 -o "$model" >/dev/null 2>&1 || fail "mkmodel q8_0"
expect_ok "info" "$CHANNEL" info -m "$model"
poke blk.1.ffn_norm.weight nan
expect_exit "run on a NaN norm (q8_0)" 1 "$CHANNEL" run -m "$model" -t 1 -n 4 -p "hello there"
grep -q "blk.1.ffn_norm.weight.*non-finite" "$TMP/err" || fail "run on a NaN norm: $(cat "$TMP/err")"
[[ $(grep -c . "$TMP/err") == 1 ]] || fail "run on a NaN norm: not one line: $(cat "$TMP/err")"
finish
