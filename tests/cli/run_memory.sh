#!/usr/bin/env bash
# `channel run --memory FILE`: the store is created for the model, what the run leaves in the
# window is consolidated into it (it verifies), a later run recalls by its prompt; another
# model's store, a garbage file and a truncated store are one-line errors and stay as they were.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command run
model="$TMP/micro.gguf"
"$CHANNEL" mkmodel --arch llama --hidden 32 --layers 2 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --vocab 300 -o "$model" >/dev/null 2>&1 || fail "mkmodel"
other="$TMP/other.gguf"
"$CHANNEL" mkmodel --arch llama --hidden 32 --layers 2 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --vocab 300 --seed 9 -o "$other" >/dev/null 2>&1 || fail "mkmodel other"
store="$TMP/run.episodic.mem"
flags=(-m "$model" -t 1 --temp 0 --slots 96 --recall-slots 64 --memory "$store")

expect_ok "first run creates the store" "$CHANNEL" run "${flags[@]}" -n 150 \
  -p "The blue door of the old tower opens at noon. Remember the code 4821."
grep -q "memory .*: created, 0 episodes" "$TMP/err" || fail "not created: $(cat "$TMP/err")"
grep -Eq "memory .*: [1-9][0-9]* episodes written \(0 dropped, 0 failed\)" "$TMP/err" ||
  fail "no episodes written: $(cat "$TMP/err")"
expect_ok "mem verify" "$CHANNEL" mem verify "$store"
expect_ok "mem ls" "$CHANNEL" mem ls "$store"
grep -q "blue door" "$TMP/out" || fail "the prompt is not among the stored episodes: $(cat "$TMP/out")"

expect_ok "second run recalls" "$CHANNEL" run "${flags[@]}" -n 5 -p "Which door opens at noon?"
grep -Eq "memory .*: opened, [1-9][0-9]* episodes" "$TMP/err" || fail "not opened: $(cat "$TMP/err")"
grep -Eq "memory .*: turn recall \(keys\) at clock [0-9]+: recalled: [0-9]+ \(" "$TMP/err" ||
  fail "nothing recalled: $(cat "$TMP/err")"
expect_ok "mem stats" "$CHANNEL" mem stats "$store"
grep -Eq "^recalls +[1-9]" "$TMP/out" || fail "no access recorded: $(cat "$TMP/out")"

# --recall-only: the run recalls but stores nothing, so the store's bytes stay as they were
# except the access counts; its episode count is unchanged.
before=$("$CHANNEL" mem stats "$store" | grep -E "^live episodes")
expect_ok "recall-only run" "$CHANNEL" run "${flags[@]}" -n 40 --recall-only \
  -p "Which door opens at noon? Tell me about the old tower and the code."
grep -Eq "recalled: [0-9]+ \(" "$TMP/err" || fail "recall-only: nothing recalled: $(cat "$TMP/err")"
grep -q "recall only, the file was not written" "$TMP/err" || fail "recall-only: $(cat "$TMP/err")"
[[ $("$CHANNEL" mem stats "$store" | grep -E "^live episodes") == "$before" ]] ||
  fail "recall-only stored episodes: $before -> $("$CHANNEL" mem stats "$store" | grep -E "^live episodes")"
expect_ok "mem query --json" "$CHANNEL" mem query -m "$model" --json -k 2 "$store" \
  --recall-method centroid --text "Which door opens at noon?"
python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; assert [x["rank"] for x in r]==[1,2] and -1<=r[0]["cosine"]<=1, r' \
  "$TMP/out" || fail "mem query --json: $(cat "$TMP/out")"
expect_error "recall-only without --memory" "needs --memory" "$CHANNEL" run -m "$model" -p hi \
  --recall-only
expect_error "recall-only, no store" "does not exist" "$CHANNEL" run -m "$model" -p hi \
  --memory "$TMP/missing.mem" --recall-only
[[ ! -e "$TMP/missing.mem" ]] || fail "--recall-only created a store"

sum=$(md5sum <"$store")
expect_error "another model" "another model" "$CHANNEL" run -m "$other" -t 1 -n 2 -p hi \
  --memory "$store"
[[ $(md5sum <"$store") == "$sum" ]] || fail "a refused store was modified"
printf 'this is not an episodic store, just some text that is long enough %.0s' {1..20} \
  >"$TMP/garbage.mem"
gsum=$(md5sum <"$TMP/garbage.mem")
expect_error "garbage store" "garbage.mem" "$CHANNEL" run -m "$model" -t 1 -n 2 -p hi \
  --memory "$TMP/garbage.mem"
[[ $(md5sum <"$TMP/garbage.mem") == "$gsum" ]] || fail "a garbage store was modified"
head -c 1000 "$store" >"$TMP/short.mem"
ssum=$(md5sum <"$TMP/short.mem")
expect_error "truncated store" "short.mem" "$CHANNEL" run -m "$model" -t 1 -n 2 -p hi \
  --memory "$TMP/short.mem"
[[ $(md5sum <"$TMP/short.mem") == "$ssum" ]] || fail "a truncated store was modified"
expect_error "bad --recall-k" "recall-k" "$CHANNEL" run -m "$model" -p hi --memory "$store" \
  --recall-k -1
finish
