#!/usr/bin/env bash
# `run --draft`: speculative greedy output equals plain greedy output (n-gram and model
# drafts), acceptance statistics are printed, and bad values fail with one clear line:
# an unknown draft model file, --draft-max 0 or > 32, a vocabulary mismatch, --temp > 0.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"

target="$TMP/target.gguf"
other_vocab="$TMP/other-vocab.gguf"
"$CHANNEL" mkmodel --arch llama --hidden 64 --layers 2 --ffn 128 --vocab 400 -o "$target" \
  >/dev/null 2>&1 || fail "mkmodel target"
"$CHANNEL" mkmodel --arch llama --hidden 64 --layers 2 --ffn 128 --vocab 300 -o "$other_vocab" \
  >/dev/null 2>&1 || fail "mkmodel other vocabulary"
prompt="a b c d e f a b c d e f a b c d"

expect_ok "plain greedy" "$CHANNEL" run -m "$target" -p "$prompt" -n 40 --temp 0 &&
  cp "$TMP/out" "$TMP/plain"
for draft_max in 1 4 32; do
  if expect_ok "ngram draft-max $draft_max" "$CHANNEL" run -m "$target" -p "$prompt" -n 40 \
    --draft ngram --draft-max "$draft_max"; then
    cmp -s "$TMP/out" "$TMP/plain" || fail "ngram draft-max $draft_max: output differs from greedy"
    grep -Eq "draft ngram, draft-max $draft_max .*accepted" "$TMP/err" ||
      fail "no acceptance statistics: $(cat "$TMP/err")"
  fi
done
if expect_ok "model draft" "$CHANNEL" run -m "$target" -p "$prompt" -n 40 --draft "$target" \
  --draft-max 5; then
  cmp -s "$TMP/out" "$TMP/plain" || fail "model draft: output differs from greedy"
fi

missing="$TMP/no-such-draft.gguf"
expect_error "unknown draft model file" "no-such-draft\.gguf" \
  "$CHANNEL" run -m "$target" -p hi --draft "$missing"
expect_error "draft-max 0" "draft-max" "$CHANNEL" run -m "$target" -p hi --draft ngram --draft-max 0
expect_error "draft-max 33" "draft-max" "$CHANNEL" run -m "$target" -p hi --draft ngram --draft-max 33
expect_error "draft-max x" "draft-max" "$CHANNEL" run -m "$target" -p hi --draft ngram --draft-max x
expect_error "vocabulary mismatch" "vocabulary" \
  "$CHANNEL" run -m "$target" -p hi --draft "$other_vocab"
expect_error "draft with --temp 0.7" "greedy" "$CHANNEL" run -m "$target" -p hi --draft ngram --temp 0.7
expect_error "draft with a repeat penalty" "greedy" \
  "$CHANNEL" run -m "$target" -p hi --draft ngram --repeat-penalty 1.1
finish
