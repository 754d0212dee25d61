#!/usr/bin/env bash
# Readers share a store with one writer: while `stream --memory` writes episodes, `mem ls`,
# `mem stats`, `mem query` and `run --recall-only` on the same file all work, and the store
# verifies once the writer stops. `--recall-only` keeps its promise: the file is not written at
# all (access counts included).
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command mem
model="$TMP/micro.gguf"
make_micro_model "$model"
geo=(--slots 192 --recall-slots 64 -t 1)
python3 -c '
import random, sys
random.seed(2)
words = ["harbor", "lantern", "meadow", "copper", "violet", "thunder", "orchard", "glacier"]
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write(" ".join(random.choice(words) for _ in range(8)) + ".\n")
' "$TMP/text.txt" 300
cp "$TMP/text.txt" "$TMP/small.txt"
python3 -c 'import sys; open(sys.argv[1], "w").write(open(sys.argv[2]).read() * 400)' "$TMP/big.txt" "$TMP/text.txt"

# A store with some episodes.
expect_ok "stream into a store" "$CHANNEL" stream -m "$model" "${geo[@]}" -f "$TMP/small.txt" --memory "$TMP/s.mem"
expect_ok "mem ls" "$CHANNEL" mem ls --json "$TMP/s.mem"
episodes=$(wc -l <"$TMP/out")
((episodes > 0)) || fail "the stream stored no episodes"

# --recall-only: recalls, and leaves every byte of the file as it was.
sum=$(md5sum <"$TMP/s.mem")
expect_ok "run --recall-only" "$CHANNEL" run -m "$model" "${geo[@]}" -n 4 --memory "$TMP/s.mem" \
  --recall-only -p "harbor lantern meadow copper"
grep -Eq "recalled: [0-9]+ \(" "$TMP/err" || fail "recall-only recalled nothing: $(cat "$TMP/err")"
[[ $(md5sum <"$TMP/s.mem") == "$sum" ]] || fail "--recall-only wrote to the store (access counts?)"
expect_ok "run --help" "$CHANNEL" run --help
grep -A3 -- "--recall-only" "$TMP/out" | tr -s ' \n' ' ' | grep -q "not written" ||
  fail "run --help does not say that --recall-only leaves the file unwritten"

# A writer streams into w.mem for a while; readers use the file meanwhile.
env --default-signal=INT "$CHANNEL" stream -m "$model" "${geo[@]}" -f "$TMP/big.txt" \
  --memory "$TMP/w.mem" >"$TMP/writer.out" 2>"$TMP/writer.err" &
writer=$!
# The watchdog's output goes nowhere: a leftover sleep must not hold ctest's pipe open.
(sleep 300 && kill -9 "$writer" 2>/dev/null) >/dev/null 2>&1 &
watchdog=$!
has_episodes() { [[ -e "$TMP/w.mem" ]] && "$CHANNEL" mem stats "$TMP/w.mem" 2>/dev/null | grep -Eq '^live episodes +[1-9]'; }
wait_for has_episodes || fail "the writer stored no episode: $(head -c 300 "$TMP/writer.err")"
for round in 1 2 3; do
  expect_ok "round $round: mem ls beside the writer" "$CHANNEL" mem ls "$TMP/w.mem"
  expect_ok "round $round: mem stats beside the writer" "$CHANNEL" mem stats "$TMP/w.mem"
  expect_ok "round $round: mem query beside the writer" "$CHANNEL" mem query "$TMP/w.mem" -m "$model" \
    -t 1 --text "orchard glacier violet"
  expect_ok "round $round: run --recall-only beside the writer" "$CHANNEL" run -m "$model" \
    "${geo[@]}" -n 2 --memory "$TMP/w.mem" --recall-only -p "thunder copper harbor"
done
kill -0 "$writer" 2>/dev/null || fail "the writer ended before the readers were done (grow big.txt)"
expect_exit "a second writer is still refused" 1 "$CHANNEL" stream -m "$model" "${geo[@]}" \
  --tokens 4 --memory "$TMP/w.mem"
kill -INT "$writer"
rc=0
wait "$writer" || rc=$?
pkill -P "$watchdog" 2>/dev/null
kill "$watchdog" 2>/dev/null
# 130: the writer saved its work and reports the SIGINT (cli_signals.h).
((rc == 130)) || fail "the writer exited $rc, expected 130: $(tail -c 300 "$TMP/writer.err")"
expect_ok "the store verifies after the writer" "$CHANNEL" mem verify "$TMP/w.mem"
finish
