#!/usr/bin/env bash
# The OpenAI-style penalties on the command line: --presence-penalty and --frequency-penalty
# change greedy text on the built-in model (which repeats itself within 40 tokens), their
# range is checked before any work, and 0 is the plain greedy text.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command run
args=(run -p "The harbour" -n 40 --temp 0 -t 1)
expect_ok "plain greedy" "$CHANNEL" "${args[@]}"
cp "$TMP/out" "$TMP/plain"
expect_ok "zero penalties" "$CHANNEL" "${args[@]}" --presence-penalty 0 --frequency-penalty 0
cmp -s "$TMP/out" "$TMP/plain" || fail "penalties of 0 changed the greedy text"
expect_ok "penalised" "$CHANNEL" "${args[@]}" --presence-penalty 1 --frequency-penalty 1.5
! cmp -s "$TMP/out" "$TMP/plain" || fail "the penalties left the greedy text as it was: $(head -c 200 "$TMP/out")"
expect_error "presence out of range" "presence-penalty" "$CHANNEL" "${args[@]}" --presence-penalty 3
expect_error "frequency not a number" "frequency-penalty" "$CHANNEL" "${args[@]}" --frequency-penalty x
finish
