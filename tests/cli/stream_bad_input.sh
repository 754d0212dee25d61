#!/usr/bin/env bash
# `channel stream` bad input: unknown flags, bad values, missing files, a geometry too small
# for the model; each is one line on stderr and a non-zero exit, never a crash.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command stream
model="$TMP/micro.gguf"
"$CHANNEL" mkmodel --arch gemma3 --hidden 32 --layers 3 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --window 8 --vocab 300 -o "$model" >/dev/null 2>&1 || fail "mkmodel"
expect_ok "stream --help" "$CHANNEL" stream --help
grep -q -- "--stats-every" "$TMP/out" || fail "stream --help does not list --stats-every"
expect_error "unknown flag" "--bogus: unknown flag" "$CHANNEL" stream -m "$model" --bogus
expect_error "--slots not a number" "--slots.*not an integer" "$CHANNEL" stream -m "$model" --slots abc
expect_error "--stats-every 0" "--stats-every: 0 is out of range" "$CHANNEL" stream -m "$model" --stats-every 0
expect_error "--tokens negative" "--tokens: -5 is out of range" "$CHANNEL" stream -m "$model" --tokens -5
expect_error "--temp negative" "--temp: -1 is out of range" "$CHANNEL" stream -m "$model" --temp -1
expect_error "missing model" "no/such.gguf" "$CHANNEL" stream -m "$TMP/no/such.gguf" --tokens 1
expect_error "missing -f file" "-f: cannot read" "$CHANNEL" stream -m "$model" -f "$TMP/none.txt"
expect_error "missing --system file" "--system: cannot read" \
  "$CHANNEL" stream -m "$model" --system "$TMP/none.txt"
expect_error "slots too small for the recall slots" "cannot hold a window.*--slots" \
  "$CHANNEL" stream -m "$model" --slots 64 --recall-slots 64 --tokens 1
expect_error "slots too small for the sliding window" "sliding window" \
  "$CHANNEL" stream -m "$model" --slots 16 --recall-slots 0 --tokens 1
printf 'word %.0s' {1..300} >"$TMP/long.txt"
expect_error "system prompt too long for the anchors" "anchors too long" \
  "$CHANNEL" stream -m "$model" --slots 200 --recall-slots 8 --system "$TMP/long.txt" --tokens 1
finish
