#!/usr/bin/env bash
# `channel embed`: one unit-length JSON array a text, the same vector for the same text
# whether given as an argument or a line of standard input, and a one-line error for no text.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command embed
expect_ok "two texts" "$CHANNEL" embed -t 1 "The harbour light is green." "A blue door."
cp "$TMP/out" "$TMP/two"
printf 'The harbour light is green.\n\n' | "$CHANNEL" embed -t 1 --lines >"$TMP/piped" 2>/dev/null ||
  fail "embed --lines failed"
python3 - "$TMP/two" "$TMP/piped" <<'PY' || fail "the vectors are not as expected"
import json, math, sys
two = [json.loads(l) for l in open(sys.argv[1])]
piped = [json.loads(l) for l in open(sys.argv[2])]
assert len(two) == 2 and len(piped) == 1, (len(two), len(piped))
assert len(two[0]) == len(two[1]) >= 32
for v in two:
    assert abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5
assert piped[0] == two[0], "the same text, another vector"
assert sum(a * b for a, b in zip(*two)) < 0.9999, "two texts, one vector"
PY
expect_error "no text" "no text" "$CHANNEL" embed
expect_error "an empty text" "no tokens" "$CHANNEL" embed ""
finish
