#!/usr/bin/env bash
# `channel run --session FILE`: a conversation kept in a session file. The first run starts
# it, the second resumes at the saved clock and advances it; sampling flags given on a resumed
# run replace the saved sampler's; another geometry and a file
# that is not a session are one-line errors, and the file is left as it was.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command run
model="$TMP/micro.gguf"
"$CHANNEL" mkmodel --arch llama --hidden 32 --layers 2 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --vocab 300 -o "$model" >/dev/null 2>&1 || fail "mkmodel"
flags=(-m "$model" --slots 96 --recall-slots 8 -t 1 -n 40 --seed 3)
expect_ok "first turn" "$CHANNEL" run "${flags[@]}" -p "hello there. how are you" --session "$TMP/chat.session"
grep -q "new session" "$TMP/err" || fail "first turn: $(cat "$TMP/err")"
clock1=$(sed -n 's/.*| clock \([0-9]*\).*/\1/p' "$TMP/err")
expect_ok "second turn" "$CHANNEL" run "${flags[@]}" -p " tell me more" --session "$TMP/chat.session"
grep -q "resumed .* at clock $clock1" "$TMP/err" || fail "second turn did not resume at $clock1: $(cat "$TMP/err")"
clock2=$(sed -n 's/.*| clock \([0-9]*\).*/\1/p' "$TMP/err")
((clock2 > clock1)) || fail "the clock did not advance: $clock1 -> $clock2"
[[ ! -e "$TMP/chat.session.tmp" ]] || fail "the temporary file was left behind"
# Sampling flags given on a resumed run replace the saved ones: two seeds give two texts at
# the saved temperature, and one text at --temp 0 (greedy ignores the seed).
more=(-m "$model" --slots 96 --recall-slots 8 -t 1 -n 30 --no-echo -p " and then")
for v in s1 s2 g1 g2; do cp "$TMP/chat.session" "$TMP/$v.session"; done
expect_ok "resume, seed 1" "$CHANNEL" run "${more[@]}" --seed 1 --session "$TMP/s1.session"
cp "$TMP/out" "$TMP/s1.out"
expect_ok "resume, seed 2" "$CHANNEL" run "${more[@]}" --seed 2 --session "$TMP/s2.session"
! cmp -s "$TMP/out" "$TMP/s1.out" || fail "--seed on a resumed session was ignored"
expect_ok "resume, greedy 1" "$CHANNEL" run "${more[@]}" --temp 0 --seed 1 --session "$TMP/g1.session"
cp "$TMP/out" "$TMP/g1.out"
expect_ok "resume, greedy 2" "$CHANNEL" run "${more[@]}" --temp 0 --seed 2 --session "$TMP/g2.session"
cmp -s "$TMP/out" "$TMP/g1.out" || fail "--temp 0 on a resumed session was ignored"
sum=$(md5sum <"$TMP/chat.session")
expect_error "another geometry" "another geometry" "$CHANNEL" run -m "$model" --slots 97 \
  --recall-slots 8 -t 1 -n 4 -p hi --session "$TMP/chat.session"
printf 'junk' >"$TMP/junk.session"
expect_error "not a session file" "bad magic" "$CHANNEL" run "${flags[@]}" -p hi --session "$TMP/junk.session"
[[ $(md5sum <"$TMP/chat.session") == "$sum" ]] || fail "a refused session file was modified"
finish
