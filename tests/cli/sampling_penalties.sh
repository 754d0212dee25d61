#!/usr/bin/env bash
# The OpenAI-style penalties on the command line: --presence-penalty and --frequency-penalty
# change greedy text on the built-in model (which repeats itself within 40 tokens) in `run`
# and in `stream` (which goes through the C API), their range is checked before any work,
# and 0 is the plain greedy text.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command run
args=(run -p "The harbour" -n 40 --temp 0 -t 1)
expect_ok "plain greedy" "$CHANNEL" "${args[@]}"
cp "$TMP/out" "$TMP/plain"
expect_ok "zero penalties" "$CHANNEL" "${args[@]}" --presence-penalty 0 --frequency-penalty 0
cmp -s "$TMP/out" "$TMP/plain" || fail "penalties of 0 changed the greedy text"
expect_ok "penalised" "$CHANNEL" "${args[@]}" --presence-penalty 1 --frequency-penalty 1.5
! cmp -s "$TMP/out" "$TMP/plain" || fail "the penalties left the greedy text as it was: $(head -c 200 "$TMP/out")"
# stream: the generated text goes to stderr with --show-text
sargs=(stream --tokens 60 --temp 0 -t 1 --show-text)
"$CHANNEL" "${sargs[@]}" 2>"$TMP/splain" >/dev/null || fail "stream plain greedy failed"
"$CHANNEL" "${sargs[@]}" --presence-penalty 1 --frequency-penalty 1.5 2>"$TMP/spen" >/dev/null ||
  fail "stream penalised failed"
# Compare the text alone (the lines between the load line and the summary line).
sed -e '1d' -e '$d' "$TMP/splain" >"$TMP/splain.text"
sed -e '1d' -e '$d' "$TMP/spen" >"$TMP/spen.text"
! cmp -s "$TMP/splain.text" "$TMP/spen.text" ||
  fail "stream: the penalties left the greedy text as it was: $(head -c 200 "$TMP/spen.text")"
expect_error "presence out of range" "presence-penalty" "$CHANNEL" "${args[@]}" --presence-penalty 3
expect_error "frequency not a number" "frequency-penalty" "$CHANNEL" "${args[@]}" --frequency-penalty x
finish
