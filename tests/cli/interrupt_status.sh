#!/usr/bin/env bash
# An interrupted command keeps its work and reports the interruption in its exit status, as
# shells expect (128 + the signal): `stream --session` saves on SIGTERM and exits 143;
# `perplexity` prints the score of the chunks it finished and exits 130 on SIGINT; `chat`
# (where Ctrl-C only interrupts a reply) saves its session on SIGTERM and exits 143.
# (`run` is checked in run_interrupt.sh.)
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command perplexity
model="$TMP/micro.gguf"
make_micro_model "$model"

# As in run_interrupt.sh: the command gets the default dispositions a terminal gives it, and a
# watchdog (writing nowhere, so it never holds ctest's pipe) kills what ignores the signal.
# launch_from FILE COMMAND...: the command reads FILE (a background job of a script would
# otherwise read /dev/null).
launch_from() {
  local input=$1
  shift
  env --default-signal=INT,TERM "$@" <"$input" &
  pid=$!
  (sleep 120 && kill -9 "$pid" 2>/dev/null) >/dev/null 2>&1 &
  watchdog=$!
}
launch() { launch_from /dev/null "$@"; }
finish_launch() {
  rc=0
  wait "$pid" || rc=$?
  pkill -P "$watchdog" 2>/dev/null
  kill "$watchdog" 2>/dev/null
  wait "$watchdog" 2>/dev/null
}

python3 -c '
import random, sys
random.seed(2)
words = ["alpha", "beta", "gamma", "delta", "river", "stone", "light", "north", "quiet", "amber"]
with open(sys.argv[1], "w") as f:
    for i in range(40000):
        f.write(" ".join(random.choice(words) for _ in range(6)) + ".\n")
' "$TMP/big.txt"

# --- stream --session, SIGTERM -------------------------------------------------------------
launch env CHANNEL_PROGRESS_SECONDS=0 "$CHANNEL" stream -m "$model" --slots 128 --recall-slots 8 \
  -t 1 -f "$TMP/big.txt" --session "$TMP/s.session" >"$TMP/stream.out" 2>"$TMP/stream.err"
stream_fed() { grep -q "channel: stream: .*% of" "$TMP/stream.err"; }
wait_for stream_fed || fail "stream -f showed no progress line: $(head -c 300 "$TMP/stream.err")"
kill -TERM "$pid"
finish_launch
((rc == 143)) || fail "stream exited $rc after SIGTERM, expected 143: $(tail -c 300 "$TMP/stream.err")"
grep -q "interrupted (SIGTERM), saved $TMP/s.session" "$TMP/stream.err" ||
  fail "stream: no summary naming SIGTERM and the saved session: $(tail -c 300 "$TMP/stream.err")"
[[ -s "$TMP/s.session" ]] || fail "stream: no session saved on SIGTERM"

# --- perplexity, SIGINT ----------------------------------------------------------------------
launch "$CHANNEL" perplexity -m "$model" -t 1 --ctx 64 -f "$TMP/big.txt" \
  >"$TMP/ppl.out" 2>"$TMP/ppl.err"
chunk_scored() { grep -q "^channel: perplexity: chunk [0-9]*/" "$TMP/ppl.err"; }
wait_for chunk_scored || fail "perplexity showed no chunk line: $(head -c 300 "$TMP/ppl.err")"
kill -INT "$pid"
finish_launch
((rc == 130)) || fail "perplexity exited $rc after SIGINT, expected 130: $(tail -c 300 "$TMP/ppl.err")"
grep -Eq "^channel: perplexity: interrupted \(SIGINT\) after [0-9]+ of [0-9]+ chunks$" "$TMP/ppl.err" ||
  fail "perplexity: no line naming the interrupt: $(tail -c 300 "$TMP/ppl.err")"
python3 - "$TMP/ppl.out" <<'PY' || fail "perplexity: the partial score is missing: $(cat "$TMP/ppl.out")"
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["interrupted"] is True and d["chunks"] >= 1, d
assert math.isfinite(d["ppl"]) and d["tokens"] == d["chunks"] * (64 - 32 - 1), d
PY

# --- chat --session, SIGTERM while it waits for input ---------------------------------------
if has_command chat && "$CHANNEL" chat --help >/dev/null 2>&1; then
  mkfifo "$TMP/chat.in"
  exec 3<>"$TMP/chat.in"  # a writer stays open: the chat waits for its next line
  launch_from "$TMP/chat.in" "$CHANNEL" chat --temp 0 -n 8 -t 1 --session "$TMP/c.session" \
    >"$TMP/chat.out" 2>"$TMP/chat.err"
  echo "What is a dog?" >&3
  chat_saved() { [[ -s "$TMP/c.session" ]]; }
  if wait_for chat_saved; then
    kill -TERM "$pid"
    finish_launch
    ((rc == 143)) || fail "chat exited $rc after SIGTERM, expected 143: $(tail -c 300 "$TMP/chat.err")"
    grep -q "saved $TMP/c.session at clock" "$TMP/chat.err" &&
      grep -q "chat ended by SIGTERM" "$TMP/chat.err" ||
      fail "chat: SIGTERM did not save and say so: $(tail -c 300 "$TMP/chat.err")"
  else
    kill -9 "$pid" 2>/dev/null
    finish_launch
    fail "chat saved no session after its first reply: $(tail -c 300 "$TMP/chat.err")"
  fi
  exec 3>&-
fi
finish
