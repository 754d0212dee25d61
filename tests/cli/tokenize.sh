#!/usr/bin/env bash
# `tokenize` and `detokenize` on stories260K and on the vocabulary-only GGUFs: the ids of
# greedy.json's notes, a round trip, and one-line errors for bad ids and files.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_testdata
model="$TESTDATA/stories260K/stories260K.gguf"
[[ -f "$model" ]] || skip_test "$model not found"

expect_ok "tokenize" "$CHANNEL" tokenize -m "$model" "Once upon a time"
[[ "$(cat "$TMP/out")" == "[1,403,407,261,378]" ]] || fail "tokenize printed $(cat "$TMP/out")"
expect_ok "tokenize --no-bos" "$CHANNEL" tokenize -m "$model" --no-bos "Once upon a time"
[[ "$(cat "$TMP/out")" == "[403,407,261,378]" ]] || fail "tokenize --no-bos printed $(cat "$TMP/out")"
expect_ok "tokenize empty text" "$CHANNEL" tokenize -m "$model" ""
[[ "$(cat "$TMP/out")" == "[1]" ]] || fail "tokenize '' printed $(cat "$TMP/out")"
# <s> is BOS when special tokens are parsed, plain text with --no-special.
expect_ok "tokenize <s>" "$CHANNEL" tokenize -m "$model" --no-bos "<s>"
[[ "$(cat "$TMP/out")" == "[1]" ]] || fail "tokenize <s> printed $(cat "$TMP/out")"
expect_ok "tokenize --no-special <s>" "$CHANNEL" tokenize -m "$model" --no-bos --no-special "<s>"
[[ "$(cat "$TMP/out")" != "[1]" ]] || fail "tokenize --no-special still parsed <s>"
expect_ok "detokenize" "$CHANNEL" detokenize -m "$model" --ids 403,407,261,378
[[ "$(cat "$TMP/out")" == "Once upon a time" ]] || fail "detokenize printed '$(cat "$TMP/out")'"
# As in llama.cpp, the prefix space is only dropped from the very first token, so after
# BOS it stays.
expect_ok "detokenize after BOS" "$CHANNEL" detokenize -m "$model" --ids 1,403,407,261,378
[[ "$(cat "$TMP/out")" == " Once upon a time" ]] || fail "detokenize printed '$(cat "$TMP/out")'"

# Round trip on a real vocabulary-only GGUF (tokenizer/ holds Gemma 3 and Llama 3 vocabularies).
for vocab in "$TESTDATA"/tokenizer/*.gguf; do
  [[ -f "$vocab" ]] || continue
  text="Hello, world! Ünïcödé — 日本語 123"
  if expect_ok "tokenize with $(basename "$vocab")" "$CHANNEL" tokenize -m "$vocab" --no-bos "$text"; then
    ids=$(tr -d '[]' <"$TMP/out")
    expect_ok "detokenize with $(basename "$vocab")" "$CHANNEL" detokenize -m "$vocab" --ids "$ids"
    [[ "$(cat "$TMP/out")" == "$text" ]] || fail "round trip with $(basename "$vocab"): '$(cat "$TMP/out")'"
  fi
done

expect_error "detokenize: id 512" "512.*vocab" "$CHANNEL" detokenize -m "$model" --ids 1,512
expect_error "detokenize: id 99999999" "99999999" "$CHANNEL" detokenize -m "$model" --ids 99999999
expect_error "detokenize: --ids 1,x" "ids.*x" "$CHANNEL" detokenize -m "$model" --ids 1,x
expect_error "tokenize: missing file" "missing\.gguf" "$CHANNEL" tokenize -m "$TMP/missing.gguf" hi
expect_error "tokenize: unknown flag" "bogus-flag" "$CHANNEL" tokenize -m "$model" --bogus-flag hi
finish
