#!/usr/bin/env bash
# One error style and one exit-code convention: every error is one line
# `channel: error: --flag: what is wrong (what is allowed)`, CLI11's parse errors included;
# usage mistakes exit 2, failures while working exit 1; episode ids are unsigned.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command run
model="$TMP/micro.gguf"
make_micro_model "$model"
store="$(dirname "$0")/../fuzz/corpus/memory_fuzz/valid_fp16.mem"

# expect_flag_error DESC FLAG COMMAND...: exit 2, one line "channel: error: FLAG: ...".
expect_flag_error() {
  local desc=$1 flag=$2
  shift 2
  expect_exit "$desc" 2 "$@"
  grep -Eq "^channel: error: $flag: " "$TMP/err" || fail "$desc: not in the '$flag: ...' style: $(cat "$TMP/err")"
  ! grep -q "<command>" "$TMP/err" || fail "$desc: a literal '<command>' hint: $(cat "$TMP/err")"
}

expect_flag_error "--ids abc" "--ids" "$CHANNEL" detokenize -m "$model" --ids abc
grep -q "(allowed: " "$TMP/err" || fail "--ids abc: does not say what is allowed"
expect_flag_error "-n abc" "--n-predict" "$CHANNEL" run -m "$model" -n abc
grep -q "(allowed: -1\.\." "$TMP/err" || fail "-n abc: does not say what is allowed: $(cat "$TMP/err")"
expect_flag_error "-t twice" "--threads" "$CHANNEL" run -m "$model" -t 1 -t 2 -p hi
grep -q "given 2 times" "$TMP/err" || fail "-t twice: $(cat "$TMP/err")"
expect_flag_error "--ctx 0" "--ctx" "$CHANNEL" run -m "$model" --ctx 0 -p hi
grep -q "out of range (allowed: 1\.\." "$TMP/err" || fail "--ctx 0: $(cat "$TMP/err")"
expect_flag_error "perplexity --ctx 2" "--ctx" "$CHANNEL" perplexity -m "$model" -f "$store" --ctx 2
expect_flag_error "mem query -k 0" "-k" "$CHANNEL" mem query "$store" -m "$model" -k 0 --text hi
expect_flag_error "mem create --capacity 0" "--capacity" "$CHANNEL" mem create "$TMP/c.mem" -m "$model" --capacity 0
expect_flag_error "-p without a value" "--prompt" "$CHANNEL" run -m "$model" -p
expect_flag_error "tokenize without TEXT" "TEXT" "$CHANNEL" tokenize -m "$model"
grep -q "(see 'channel tokenize --help')" "$TMP/err" || fail "the hint does not name the command: $(cat "$TMP/err")"
expect_flag_error "an unknown flag" "--bogus" "$CHANNEL" run -m "$model" --bogus
expect_flag_error "--recall-only without --memory" "--recall-only" "$CHANNEL" run -m "$model" -p hi --recall-only
expect_flag_error "--turns without -f" "--turns" "$CHANNEL" stream -m "$model" --turns
expect_flag_error "-p and -f" "--(prompt|file)" "$CHANNEL" run -m "$model" -p hi -f "$store"
expect_exit "no subcommand" 2 "$CHANNEL"
expect_exit "an unknown command" 2 "$CHANNEL" not-a-command

# Episode ids are unsigned: -1 is refused, not read as 18446744073709551615.
expect_flag_error "mem show F -1" "ID" "$CHANNEL" mem show "$store" -1
grep -q "not an episode id" "$TMP/err" || fail "mem show -1: $(cat "$TMP/err")"
! grep -q "not in the store" "$TMP/err" || fail "-1 was read as an id: $(cat "$TMP/err")"
expect_flag_error "mem show F abc" "ID" "$CHANNEL" mem show "$store" abc
expect_flag_error "mem rm F -3" "ID" "$CHANNEL" mem rm "$store" -3

# Failures while working exit 1, in the same one-line style.
expect_exit "a missing model" 1 "$CHANNEL" run -m "$TMP/missing.gguf" -p hi
expect_exit "a missing store" 1 "$CHANNEL" mem ls "$TMP/missing.mem"
expect_exit "a token id outside the vocabulary" 1 "$CHANNEL" detokenize -m "$model" --ids 1,300
finish
