#!/usr/bin/env bash
# `channel stream` prints one JSON line every K tokens exactly, with the documented keys in
# order, while generating and while feeding a file; the built-in model streams without -m.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command stream
command -v python3 >/dev/null || skip_test "python3 is needed to parse the JSON lines"
model="$TMP/micro.gguf"
"$CHANNEL" mkmodel --arch gemma3 --hidden 32 --layers 3 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --window 8 --vocab 300 -o "$model" >/dev/null 2>&1 || fail "mkmodel"

# check_lines FILE COUNT EVERY FIRST_CLOCK SLOTS: COUNT lines, clocks FIRST_CLOCK + i*EVERY.
check_lines() {
  python3 - "$@" <<'PY' || fail "JSON lines of $1: $(head -c 400 "$1")"
import json, sys
path, count, every, first, slots = sys.argv[1], *map(int, sys.argv[2:])
keys = ["clock", "anchors", "window_used", "recall_used", "spans", "evicted_spans",
        "max_distance", "rss_bytes", "rss_anon_bytes", "rss_file_bytes", "tok_per_s"]
lines = open(path).read().splitlines()
assert len(lines) == count, f"{len(lines)} lines, expected {count}"
for i, line in enumerate(lines):
    d = json.loads(line)
    assert list(d) == keys, f"keys {list(d)}"
    assert d["clock"] == first + i * every, f"line {i}: clock {d['clock']}"
    assert d["max_distance"] < slots and d["window_used"] <= slots
    assert d["rss_bytes"] > 0 and d["tok_per_s"] >= 0
    assert d["rss_anon_bytes"] > 0 and d["rss_file_bytes"] > 0
PY
}

expect_ok "generate 300 tokens, stats every 30" \
  "$CHANNEL" stream -m "$model" --tokens 300 --stats-every 30 --slots 128 --recall-slots 8 -t 1
check_lines "$TMP/out" 10 30 $((1 + 30)) 128  # BOS is the one anchor
python3 -c "import json,sys; d=[json.loads(l) for l in open('$TMP/out')]; assert d[-1]['evicted_spans'] > 0" ||
  fail "no span was evicted in a 128-slot geometry"

printf 'the cat sat on the mat. it was warm!\nthen it slept. ' >"$TMP/one.txt"
for _ in $(seq 40); do cat "$TMP/one.txt"; done >"$TMP/text.txt"
printf 'you are a cat.' >"$TMP/system.txt"
expect_ok "feed a file, stats every 50" "$CHANNEL" stream -m "$model" -f "$TMP/text.txt" \
  --system "$TMP/system.txt" --stats-every 50 --slots 128 --recall-slots 8 -t 1 --tokens 500
anchors=$(python3 -c "import json; print(json.loads(open('$TMP/out').readline())['anchors'])")
check_lines "$TMP/out" 10 50 $((anchors + 50)) 128
((anchors > 5)) || fail "the system prompt gave $anchors anchors"

expect_ok "--show-text writes the text to stderr" "$CHANNEL" stream -m "$model" --tokens 20 \
  --stats-every 10 --show-text --slots 128 --recall-slots 8 -t 1
[[ $(wc -l <"$TMP/out") == 2 ]] || fail "--show-text changed stdout: $(cat "$TMP/out")"

if "$CHANNEL" run -n 1 -p hi >/dev/null 2>&1; then
  expect_ok "built-in model" "$CHANNEL" stream --tokens 16 --stats-every 8 --slots 1024 -t 1
  [[ $(wc -l <"$TMP/out") == 2 ]] || fail "built-in model: $(cat "$TMP/out")"
fi
finish
