#!/usr/bin/env bash
# `run --draft`: speculative greedy output equals plain greedy output (n-gram and model
# drafts; on the ring, where a session file carries it across turns, and on --ctx's contiguous
# context), acceptance statistics are printed, and bad values fail with one clear line:
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

# On the ring (no --ctx): a session file kept across turns, the second turn resumed with its
# drafts; the text equals plain greedy turns'.
sess_plain="$TMP/plain.session" sess_draft="$TMP/draft.session"
for turn in 1 2; do
  expect_ok "plain turn $turn" "$CHANNEL" run -m "$target" --session "$sess_plain" -p "$prompt" \
    -n 30 --temp 0 --no-echo && cp "$TMP/out" "$TMP/plain.$turn"
  if expect_ok "draft turn $turn" "$CHANNEL" run -m "$target" --session "$sess_draft" \
    -p "$prompt" -n 30 --draft ngram --draft-max 4 --no-echo; then
    cmp -s "$TMP/out" "$TMP/plain.$turn" || fail "ring turn $turn: drafted text differs from greedy"
    grep -Eq "draft ngram, draft-max 4 .*accepted" "$TMP/err" || fail "turn $turn: no statistics"
  fi
done
# A resumed session verifies at most its probe reserve: fewer drafts, said on stderr.
if expect_ok "draft-max above the session's" "$CHANNEL" run -m "$target" --session "$sess_draft" \
  -p "$prompt" -n 10 --draft ngram --draft-max 8 --no-echo; then
  grep -q "so 4 drafts" "$TMP/err" || fail "no note on the smaller draft-max: $(cat "$TMP/err")"
fi
expect_error "draft on a session saved without a probe reserve" "without room for a verify" \
  "$CHANNEL" run -m "$target" --session "$sess_plain" -p hi --draft ngram
# Past the window's wrap (--slots 48, 8 recall slots): prompt lookup and a draft model give one greedy text.
if expect_ok "ngram past the wrap" "$CHANNEL" run -m "$target" --slots 48 --recall-slots 8 -p "$prompt" -n 120 \
  --draft ngram --draft-max 6; then
  cp "$TMP/out" "$TMP/wrap.ngram"
  grep -Eq "clock 1[3-9][0-9]" "$TMP/err" || fail "the run did not pass 130 tokens: $(tail -2 "$TMP/err")"
  expect_ok "model draft past the wrap" "$CHANNEL" run -m "$target" --slots 48 --recall-slots 8 -p "$prompt" \
    -n 120 --draft "$target" --draft-max 6 &&
    { cmp -s "$TMP/out" "$TMP/wrap.ngram" || fail "past the wrap: the two drafters' texts differ"; }
fi
expect_exit "draft with --memory" 2 "$CHANNEL" run -m "$target" -p hi --draft ngram --memory "$TMP/m.mem"
expect_exit "draft with --ctx and --session" 2 \
  "$CHANNEL" run -m "$target" -p hi --draft ngram --ctx 64 --session "$TMP/x.session"

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
