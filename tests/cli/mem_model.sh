#!/usr/bin/env bash
# `channel mem create|add|query` with the built-in model: texts stored as episodes are found
# again by their own text, the store verifies, and a store of another model is refused.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command mem
"$CHANNEL" mem create "$TMP/probe.mem" --capacity 1 >/dev/null 2>&1 ||
  skip_test "this build has no built-in model"
store="$TMP/facts.episodic.mem"
expect_ok "mem create" "$CHANNEL" mem create "$store" --capacity 8 --max-tokens 32
expect_error "mem create: existing file" "already exists" "$CHANNEL" mem create "$store"
facts=(
  "The red key is hidden under the blue flower pot."
  "Anna was born in a small village near the sea."
  "The train to the mountains leaves at seven in the morning."
  "My favourite soup is made of green peas and mint."
  "The old clock in the hall stopped on a rainy Tuesday."
)
for i in "${!facts[@]}"; do
  expect_ok "mem add $i" "$CHANNEL" mem add "$store" --text "${facts[$i]}"
  [[ "$(cat "$TMP/out")" == "$i" ]] || fail "mem add $i printed $(cat "$TMP/out")"
done
for i in "${!facts[@]}"; do
  expect_ok "mem query $i" "$CHANNEL" mem query "$store" --text "${facts[$i]}" -k 3 \
    --recall-method centroid
  top=$(awk 'NR == 2 { print $2 }' "$TMP/out")
  [[ "$top" == "$i" ]] || fail "mem query of fact $i found episode $top first: $(cat "$TMP/out")"
  [[ $(wc -l <"$TMP/out") == 4 ]] || fail "mem query -k 3 printed $(cat "$TMP/out")"
done
expect_ok "mem ls" "$CHANNEL" mem ls "$store"
grep -q "red key is hidden" "$TMP/out" || fail "mem ls: no summary: $(cat "$TMP/out")"
expect_ok "mem verify" "$CHANNEL" mem verify "$store"
expect_ok "mem show" "$CHANNEL" mem show "$store" 3
grep -q '^parent  *2$' "$TMP/out" || fail "mem show parent: $(cat "$TMP/out")"
long=$(printf 'word %.0s' {1..40})
expect_error "mem add: too long" "at most 32" "$CHANNEL" mem add "$store" --text "$long"
other="$TESTDATA/stories260K/stories260K.gguf"
if [[ -f "$other" ]]; then
  before=$(md5sum <"$store")
  expect_error "mem query: another model" "another model" "$CHANNEL" mem query "$store" -m "$other" --text hi
  [[ "$(md5sum <"$store")" == "$before" ]] || fail "the store changed after a refused open"
fi
finish
