#!/usr/bin/env bash
# `channel stream --session FILE`: 100 + 100 tokens through a saved and resumed session
# end in the same file, byte for byte, as 200 tokens in one run; sampling flags given on
# resume apply; corrupt, truncated and mismatched files are one-line errors and stay as they
# were.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command stream
model="$TMP/micro.gguf"
"$CHANNEL" mkmodel --arch gemma3 --hidden 32 --layers 3 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --window 8 --vocab 300 -o "$model" >/dev/null 2>&1 || fail "mkmodel"
other="$TMP/other.gguf"
"$CHANNEL" mkmodel --arch gemma3 --hidden 32 --layers 3 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --window 8 --vocab 300 --seed 9 -o "$other" >/dev/null 2>&1 || fail "mkmodel other"
flags=(-m "$model" --slots 128 --recall-slots 8 -t 1 --stats-every 50 --repeat-penalty 1.1)

expect_ok "200 tokens in one run" "$CHANNEL" stream "${flags[@]}" --tokens 200 --session "$TMP/one.session"
expect_ok "100 tokens" "$CHANNEL" stream "${flags[@]}" --tokens 100 --session "$TMP/two.session"
grep -q "new session" "$TMP/err" || fail "first run did not start a new session: $(cat "$TMP/err")"
expect_ok "100 more tokens, resumed" "$CHANNEL" stream "${flags[@]}" --tokens 100 --session "$TMP/two.session"
grep -q "resumed" "$TMP/err" || fail "second run did not resume: $(cat "$TMP/err")"
[[ $(head -c 12 "$TMP/out") == '{"clock":151' ]] || fail "resumed clock: $(head -1 "$TMP/out")"
cmp -s "$TMP/one.session" "$TMP/two.session" || fail "200 tokens != 100 + 100 resumed tokens"
[[ ! -e "$TMP/two.session.tmp" ]] || fail "the temporary file was left behind"
# Sampling flags given to a resumed session replace the saved ones: two seeds, two texts at
# the saved temperature; one text at --temp 0.
text_of() { sed -n '/^channel: loaded/,$p' "$TMP/err" | grep -av '^channel: '; }
for v in s1 s2 g1 g2; do cp "$TMP/one.session" "$TMP/$v.session"; done
expect_ok "resume, seed 1" "$CHANNEL" stream "${flags[@]}" --tokens 40 --show-text --seed 1 \
  --session "$TMP/s1.session"
t1=$(text_of)
expect_ok "resume, seed 2" "$CHANNEL" stream "${flags[@]}" --tokens 40 --show-text --seed 2 \
  --session "$TMP/s2.session"
[[ "$(text_of)" != "$t1" ]] || fail "--seed on a resumed stream was ignored"
expect_ok "resume, greedy 1" "$CHANNEL" stream "${flags[@]}" --tokens 40 --show-text --temp 0 \
  --seed 1 --session "$TMP/g1.session"
g1=$(text_of)
expect_ok "resume, greedy 2" "$CHANNEL" stream "${flags[@]}" --tokens 40 --show-text --temp 0 \
  --seed 2 --session "$TMP/g2.session"
[[ "$(text_of)" == "$g1" && -n "$g1" ]] || fail "--temp 0 on a resumed stream was ignored"

good="$TMP/two.session"
sum=$(md5sum <"$good")
expect_error "another model" "another model" "$CHANNEL" stream -m "$other" --slots 128 \
  --recall-slots 8 -t 1 --tokens 10 --session "$good"
expect_error "another geometry" "another geometry" "$CHANNEL" stream -m "$model" --slots 129 \
  --recall-slots 8 -t 1 --tokens 10 --session "$good"
[[ $(md5sum <"$good") == "$sum" ]] || fail "a refused session file was modified"
size=$(stat -c %s "$good")
cp "$good" "$TMP/corrupt.session"
printf '\x55' | dd of="$TMP/corrupt.session" bs=1 seek=$((size / 2)) conv=notrunc status=none
sum=$(md5sum <"$TMP/corrupt.session")
expect_error "corrupt file" "checksum mismatch" "$CHANNEL" stream "${flags[@]}" --tokens 10 \
  --session "$TMP/corrupt.session"
[[ $(md5sum <"$TMP/corrupt.session") == "$sum" ]] || fail "the corrupt file was modified"
head -c $((size - 10)) "$good" >"$TMP/short.session"
expect_error "truncated file" "truncated" "$CHANNEL" stream "${flags[@]}" --tokens 10 \
  --session "$TMP/short.session"
printf 'not a session' >"$TMP/junk.session"
expect_error "not a session file" "bad magic" "$CHANNEL" stream "${flags[@]}" --tokens 10 \
  --session "$TMP/junk.session"
finish
