#!/usr/bin/env bash
# Ctrl-C never loses work: `run --session` saves its session on SIGINT and SIGTERM (and says
# so in its summary), exits 130 / 143 as shells expect of an interrupted command, and the
# saved session resumes (greedy: this random model never ends its reply); `stream -f` stops
# within one decode step of a SIGINT, not at the next --stats-every boundary, and exits 130.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command run
model="$TMP/micro.gguf"
make_micro_model "$model"

# A background job of a script starts with SIGINT ignored; `env --default-signal` gives the
# command the disposition it has under a terminal's Ctrl-C. A watchdog kills what ignores it.
launch() {
  env --default-signal=INT,TERM "$@" &
  pid=$!
  # output to nowhere: a leftover sleep must not hold ctest's pipe open
  (sleep 120 && kill -9 "$pid" 2>/dev/null) >/dev/null 2>&1 &
  watchdog=$!
}
finish_launch() {
  rc=0
  wait "$pid" || rc=$?
  pkill -P "$watchdog" 2>/dev/null
  kill "$watchdog" 2>/dev/null
  wait "$watchdog" 2>/dev/null
}

out_has_text() { [[ -s "$TMP/run.out" && $(wc -c <"$TMP/run.out") -gt 200 ]]; }
for sig in INT TERM; do
  session="$TMP/$sig.session"
  launch "$CHANNEL" run -m "$model" --slots 96 --recall-slots 8 -t 1 -n 100000000 --temp 0 \
    -p "hello there" --session "$session" >"$TMP/run.out" 2>"$TMP/run.err"
  wait_for out_has_text || fail "SIG$sig: run produced no text: $(head -c 300 "$TMP/run.err")"
  kill -"$sig" "$pid"
  finish_launch
  want=$((128 + $(kill -l "$sig")))
  if ((rc != want)); then
    fail "SIG$sig: run exited $rc, expected $want after saving: $(tail -c 300 "$TMP/run.err")"
  fi
  grep -q "stop: interrupted (SIG$sig)" "$TMP/run.err" ||
    fail "SIG$sig: no summary naming the interrupt: $(tail -c 300 "$TMP/run.err")"
  [[ -s "$session" ]] || fail "SIG$sig: no session file was written"
  clock=$(sed -n 's/.*| clock \([0-9]*\).*/\1/p' "$TMP/run.err")
  if [[ -s "$session" ]]; then
    expect_ok "SIG$sig: the saved session resumes" "$CHANNEL" run -m "$model" --slots 96 \
      --recall-slots 8 -t 1 -n 2 -p " more" --session "$session" &&
      { grep -q "resumed .* at clock $clock" "$TMP/err" || fail "SIG$sig: not resumed at $clock: $(cat "$TMP/err")"; }
  fi
done

# stream -f: with --stats-every and --tokens far beyond what is fed before the signal, the old
# loop fed everything up to the stats boundary first; now it stops within one batch.
python3 -c '
import random, sys
random.seed(1)
words = ["alpha", "beta", "gamma", "delta", "river", "stone", "light", "north", "quiet", "amber"]
with open(sys.argv[1], "w") as f:
    for i in range(60000):
        f.write(" ".join(random.choice(words) for _ in range(6)) + ".\n")
' "$TMP/big.txt"
limit=1500000
launch env CHANNEL_PROGRESS_SECONDS=0 "$CHANNEL" stream -m "$model" --slots 128 --recall-slots 8 \
  -t 1 -f "$TMP/big.txt" --tokens $limit --stats-every $limit >"$TMP/stream.out" 2>"$TMP/stream.err"
# Fed tokens show up in the progress line (or, without one, once the file is tokenized).
progress_shown() { grep -q "channel: stream: .*% of" "$TMP/stream.err"; }
wait_for progress_shown || { fail "stream -f showed no progress line"; sleep 2; }
kill -INT "$pid"
finish_launch
((rc == 130)) || fail "stream exited $rc after SIGINT, expected 130: $(tail -c 300 "$TMP/stream.err")"
streamed=$(sed -n 's/^channel: streamed \([0-9]*\) tokens.*/\1/p' "$TMP/stream.err")
grep -q "interrupted (SIGINT)" "$TMP/stream.err" || fail "stream summary does not say interrupted: $(tail -c 300 "$TMP/stream.err")"
if [[ -z "$streamed" ]] || ((streamed >= limit)); then
  fail "stream fed ${streamed:-?} of $limit tokens after SIGINT: it did not stop within a step"
else
  echo "ok: stream stopped after $streamed of $limit tokens"
fi
finish
