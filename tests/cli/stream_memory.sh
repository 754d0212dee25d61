#!/usr/bin/env bash
# `channel stream --memory FILE`: a text streamed through a small window is consolidated into
# a store that verifies and holds the whole text; a store of another model and a damaged
# store are one-line errors and stay as they were.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command stream
model="$TMP/micro.gguf"
# Six layers: layer 5 is global (the store keeps it), the others slide over 8 tokens.
"$CHANNEL" mkmodel --arch gemma3 --hidden 32 --layers 6 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --window 8 --vocab 300 -o "$model" >/dev/null 2>&1 || fail "mkmodel"
other="$TMP/other.gguf"
"$CHANNEL" mkmodel --arch gemma3 --hidden 32 --layers 6 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --window 8 --vocab 300 --seed 9 -o "$other" >/dev/null 2>&1 || fail "mkmodel other"
allsliding="$TMP/sliding.gguf"
"$CHANNEL" mkmodel --arch gemma3 --hidden 32 --layers 3 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --window 8 --vocab 300 -o "$allsliding" >/dev/null 2>&1 || fail "mkmodel sliding"
for i in $(seq 1 40); do echo "Sentence number $i is here. It has a second part."; done >"$TMP/text.txt"
store="$TMP/s.episodic.mem"
flags=(-m "$model" --slots 128 --recall-slots 16 -t 1 --stats-every 1000)

expect_ok "stream -f with --memory" "$CHANNEL" stream "${flags[@]}" -f "$TMP/text.txt" --memory "$store"
grep -q "memory .*: consolidated" "$TMP/err" || fail "no consolidation line: $(cat "$TMP/err")"
expect_ok "mem verify" "$CHANNEL" mem verify "$store"
expect_ok "mem ls" "$CHANNEL" mem ls "$store"
# (The micro model's synthetic vocabulary may render spaces as U+2581.)
grep -Eq "number.{1,3}1 is here" "$TMP/out" || fail "the first sentence is not stored: $(cat "$TMP/out")"
grep -Eq "number.{1,3}40 is here" "$TMP/out" || fail "the last sentence is not stored: $(cat "$TMP/out")"

sum=$(md5sum <"$store")
expect_error "another model" "another model" "$CHANNEL" stream -m "$other" --slots 128 \
  --recall-slots 16 -t 1 --tokens 10 --memory "$store"
[[ $(md5sum <"$store") == "$sum" ]] || fail "a refused store was modified"
head -c 4000 "$store" >"$TMP/short.mem"
ssum=$(md5sum <"$TMP/short.mem")
expect_error "truncated store" "short.mem" "$CHANNEL" stream "${flags[@]}" --tokens 10 \
  --memory "$TMP/short.mem"
[[ $(md5sum <"$TMP/short.mem") == "$ssum" ]] || fail "a truncated store was modified"
expect_error "no global layer" "no global layer" "$CHANNEL" stream -m "$allsliding" --slots 128 \
  --recall-slots 16 -t 1 --tokens 10 --memory "$TMP/none.mem"
[[ ! -e "$TMP/none.mem" ]] || fail "a store was created for a model without global layers"
finish
