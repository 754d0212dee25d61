#!/usr/bin/env bash
# What people expect to see: progress on long work (stream -f, perplexity, a long prompt, model
# load, stream's included; plain lines when stderr is not a terminal, here every update with
# CHANNEL_PROGRESS_SECONDS=0), prompts from a file or stdin and --system FILE for `run`, human
# units in text (MiB, dates), `info` listing tensors (and working on a vocabulary-only file),
# `tokenize --pieces`, an aligned bench table, and one default capacity for a new store.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command run
model="$TMP/micro.gguf"
make_micro_model "$model"
geo=(--slots 192 --recall-slots 64 -t 1)
python3 -c 'print("the quick brown fox jumps over the lazy dog. " * 60)' >"$TMP/long.txt"
export CHANNEL_PROGRESS_SECONDS=0

# --- progress -------------------------------------------------------------------------------
expect_ok "stream -f" "$CHANNEL" stream -m "$model" "${geo[@]}" -f "$TMP/long.txt"
grep -Eq "^channel: stream: [0-9]+% of .*long.txt, [0-9]+ tokens, [0-9]+ tok/s, ETA " "$TMP/err" ||
  fail "stream -f: no progress line: $(head -c 400 "$TMP/err")"
grep -Eq "RSS [0-9.]+ (KiB|MiB|GiB)" "$TMP/err" || fail "stream summary has no RSS in MiB: $(tail -n 1 "$TMP/err")"
# stream loads through the C API (channel_model_load_ex's progress callback): the same load
# line as the other commands, plain (no carriage return) when stderr is not a terminal.
grep -Eq "^channel: loading micro.gguf: [0-9]+%" "$TMP/err" ||
  fail "stream: no model load progress: $(head -c 300 "$TMP/err")"
grep -q "^channel: loading micro.gguf: 100%" "$TMP/err" || fail "stream: the load never reached 100%"
! grep -q $'\r' "$TMP/err" || fail "stream: a terminal redraw (\\r) although stderr is a file"
grep -q '"rss_bytes":[0-9]' "$TMP/out" || fail "the JSON lines lost rss_bytes: $(head -n 1 "$TMP/out")"
expect_ok "perplexity" "$CHANNEL" perplexity -m "$model" -t 1 -f "$TMP/long.txt" --ctx 64
grep -Eq "^channel: perplexity: chunk 1/[0-9]+: ppl [0-9.]+, ETA " "$TMP/err" ||
  fail "perplexity: no chunk i/n line with an ETA: $(head -c 400 "$TMP/err")"
expect_ok "run -f a long prompt" "$CHANNEL" run -m "$model" -t 1 -n 2 --ctx 4096 -f "$TMP/long.txt"
grep -Eq "^channel: prompt: [0-9]+/[0-9]+ prompt tokens, [0-9]+ tok/s" "$TMP/err" ||
  fail "run: no prompt progress: $(head -c 400 "$TMP/err")"
grep -Eq "^channel: loading micro.gguf: [0-9]+%" "$TMP/err" || fail "no model load progress: $(head -c 300 "$TMP/err")"
expect_ok "run --session -f a long prompt" "$CHANNEL" run -m "$model" "${geo[@]}" -n 2 \
  -f "$TMP/long.txt" --session "$TMP/p.session"
grep -Eq "^channel: prompt: [0-9]+/[0-9]+ prompt tokens" "$TMP/err" ||
  fail "run --session: no prompt progress: $(head -c 400 "$TMP/err")"
unset CHANNEL_PROGRESS_SECONDS
expect_ok "a short run prints no progress" "$CHANNEL" run -m "$model" -t 1 -n 2 -p hi
! grep -q "channel: loading\|channel: prompt:" "$TMP/err" || fail "progress on a short run: $(cat "$TMP/err")"
expect_ok "a short stream prints no progress" "$CHANNEL" stream -m "$model" "${geo[@]}" --tokens 4
! grep -q "channel: loading\|channel: stream:" "$TMP/err" || fail "progress on a short stream: $(cat "$TMP/err")"

# --- prompts from files and stdin -------------------------------------------------------------
printf 'from a file' >"$TMP/prompt.txt"
expect_ok "run -f FILE" "$CHANNEL" run -m "$model" -t 1 -n 2 -f "$TMP/prompt.txt"
grep -q "^from a file" "$TMP/out" || fail "run -f: the prompt is not echoed: $(cat "$TMP/out")"
rc=0
printf 'from stdin' | "$CHANNEL" run -m "$model" -t 1 -n 2 -f - >"$TMP/out" 2>"$TMP/err" || rc=$?
((rc == 0)) && grep -q "^from stdin" "$TMP/out" || fail "run -f -: $(cat "$TMP/err")"
# 140 KB: more than one command-line argument may hold (128 KiB).
python3 -c 'print("word " * 28000)' >"$TMP/big_prompt.txt"
expect_ok "run -f a 140 KB prompt" "$CHANNEL" run -m "$model" "${geo[@]}" -n 1 --no-echo \
  -f "$TMP/big_prompt.txt" --session "$TMP/big.session"
printf 'You are terse.' >"$TMP/system.txt"
expect_ok "run --session without --system" "$CHANNEL" run -m "$model" "${geo[@]}" -n 1 -p hi --session "$TMP/a.session"
plain=$(sed -n 's/.*new session .* at clock \([0-9]*\)$/\1/p' "$TMP/err")
expect_ok "run --session --system FILE" "$CHANNEL" run -m "$model" "${geo[@]}" -n 1 -p hi \
  --system "$TMP/system.txt" --session "$TMP/b.session"
with=$(sed -n 's/.*new session .* at clock \([0-9]*\)$/\1/p' "$TMP/err")
[[ -n "$plain" && -n "$with" ]] && ((with > plain)) ||
  fail "--system did not become anchors: clock $plain without, $with with"
expect_ok "run --system FILE without a session" "$CHANNEL" run -m "$model" -t 1 -n 1 -p hi --system "$TMP/system.txt"

# --- human units ---------------------------------------------------------------------------
seeds="$(dirname "$0")/../fuzz/corpus/memory_fuzz"
expect_ok "mem show" "$CHANNEL" mem show "$seeds/valid_fp16.mem" 1
grep -Eq '^created +[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} UTC$' "$TMP/out" ||
  fail "mem show: created is not a date: $(grep created "$TMP/out")"
grep -Eq '^last_accessed +([0-9]{4}-|never)' "$TMP/out" || fail "mem show: last_accessed: $(cat "$TMP/out")"

# --- info, tokenize, bench ---------------------------------------------------------------------
expect_ok "info" "$CHANNEL" info -m "$model"
python3 - "$TMP/out" <<'PY' || fail "info does not list the tensors: $(head -c 300 "$TMP/out")"
import json, sys
d = json.load(open(sys.argv[1]))
names = [t["name"] for t in d["tensors"]]
assert len(names) == d["n_tensors"] and "token_embd.weight" in names, names
t = d["tensors"][0]
assert set(t) >= {"name", "type", "shape", "bytes", "offset"}, t
PY
vocab="$TESTDATA/tokenizer/llama3-vocab.gguf"
if [[ -f "$vocab" ]]; then
  expect_ok "info on a vocabulary-only file" "$CHANNEL" info -m "$vocab"
  grep -q '"vocab_only": true' "$TMP/out" || fail "info on a vocab-only file: $(head -c 300 "$TMP/out")"
else
  echo "(no $vocab: the vocabulary-only check is skipped)"
fi
expect_ok "tokenize --pieces" "$CHANNEL" tokenize -m "$model" --no-bos --pieces "hello world"
python3 - "$TMP/out" <<'PY' || fail "tokenize --pieces: $(cat "$TMP/out")"
import json, sys
pairs = json.load(open(sys.argv[1]))
assert all(isinstance(i, int) and isinstance(p, str) for i, p in pairs), pairs
assert "".join(p for _, p in pairs) == "hello world", pairs
PY
expect_ok "bench" "$CHANNEL" bench -m "$model" -t 1 -p 8 -n 4 -r 2
python3 - "$TMP/err" <<'PY' || fail "the bench table does not align: $(cat "$TMP/err")"
import sys
rows = [l.rstrip("\n") for l in open(sys.argv[1], encoding="utf-8") if l.startswith("|")]
assert len(rows) == 4, rows
assert len({len(r) for r in rows}) == 1, [len(r) for r in rows]
assert len({tuple(i for i, c in enumerate(r) if c == "|") for r in rows}) == 1, rows
PY

# --- one default capacity ---------------------------------------------------------------------
for spec in "run" "stream" "mem create"; do
  read -r -a words <<<"$spec"
  expect_ok "$spec --help" "$CHANNEL" "${words[@]}" --help
  grep -Eq -- "--(memory-)?capacity [A-Z]+=4096" "$TMP/out" ||
    fail "$spec --help does not show the default capacity 4096: $(grep -i capacity "$TMP/out")"
done
expect_ok "run creates a store" "$CHANNEL" run -m "$model" "${geo[@]}" -n 1 -p hi --memory "$TMP/r.mem"
expect_ok "stream creates a store" "$CHANNEL" stream -m "$model" "${geo[@]}" --tokens 4 --memory "$TMP/s.mem"
expect_ok "mem create" "$CHANNEL" mem create "$TMP/c.mem" -m "$model"
for f in r s c; do
  expect_ok "mem stats $f.mem" "$CHANNEL" mem stats "$TMP/$f.mem"
  grep -q "^capacity  *4096 episodes" "$TMP/out" || fail "$f.mem: $(grep capacity "$TMP/out")"
done
finish
