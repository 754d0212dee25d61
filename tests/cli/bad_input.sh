#!/usr/bin/env bash
# Bad input that needs no reference data: unknown commands and flags, non-numeric and
# out-of-range values, missing, empty, garbage and wrong-version model files. Each must
# exit non-zero, without a signal, with exactly one line on stderr naming the problem.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"

missing="$TMP/no-such-dir/missing-model.gguf"
garbage="$TMP/garbage.gguf"
empty="$TMP/empty.gguf"
wrong_version="$TMP/wrong-version.gguf"
yes "this is not a gguf file" | head -c 5000 >"$garbage"
: >"$empty"
# A GGUF header with version 99: magic "GGUF", u32 version, u64 tensor and kv counts.
printf 'GGUF\x63\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' >"$wrong_version"

expect_error "no subcommand" "subcommand" "$CHANNEL"
expect_error "unknown subcommand" "not-a-command" "$CHANNEL" not-a-command

# Every subcommand rejects an unknown flag.
mapfile -t commands < <(list_commands)
for cmd in "${commands[@]}"; do
  expect_error "$cmd: unknown flag" "bogus-flag" "$CHANNEL" "$cmd" --bogus-flag
done

# Non-numeric and out-of-range values (rejected while parsing, before any model loads).
expect_error "run -n abc" "abc" "$CHANNEL" run -m "$missing" -n abc
expect_error "run --temp warm" "warm" "$CHANNEL" run -m "$missing" --temp warm
expect_error "run --top-k many" "many" "$CHANNEL" run -m "$missing" --top-k many
expect_error "run --top-p 0.9x" "0\.9x" "$CHANNEL" run -m "$missing" --top-p 0.9x
expect_error "run --min-p ?" "min-p" "$CHANNEL" run -m "$missing" --min-p '?'
expect_error "run --repeat-penalty x" "repeat-penalty" "$CHANNEL" run -m "$missing" --repeat-penalty x
expect_error "run --seed s" "seed" "$CHANNEL" run -m "$missing" --seed s
expect_error "run -t two" "two" "$CHANNEL" run -m "$missing" -t two
expect_error "run --ctx 1k" "1k" "$CHANNEL" run -m "$missing" --ctx 1k
expect_error "run --temp -1" "temp" "$CHANNEL" run -m "$missing" --temp -1
expect_error "run --top-p 2" "top-p" "$CHANNEL" run -m "$missing" --top-p 2
expect_error "run -t 0" "threads|-t" "$CHANNEL" run -m "$missing" -t 0
expect_error "bench -p abc" "abc" "$CHANNEL" bench -m "$missing" -p abc
expect_error "bench -n 1.5" "1\.5" "$CHANNEL" bench -m "$missing" -n 1.5
expect_error "bench -r none" "none" "$CHANNEL" bench -m "$missing" -r none
expect_error "detokenize --ids 1,x,3" "ids.*x" "$CHANNEL" detokenize -m "$missing" --ids 1,x,3
expect_error "detokenize --ids -5" "ids.*-5" "$CHANNEL" detokenize -m "$missing" --ids=-5
expect_error "detokenize --ids empty" "ids" "$CHANNEL" detokenize -m "$missing" --ids ''
expect_error "detokenize without --ids" "ids" "$CHANNEL" detokenize -m "$missing"
expect_error "tokenize without TEXT" "TEXT" "$CHANNEL" tokenize -m "$missing"

# Missing, empty, garbage and wrong-version files, for each model-reading command.
model_commands=(
  "run -n 1 -p hi"
  "bench -p 4 -n 2 -r 1"
  "tokenize hello"
  "detokenize --ids 1,2"
)
model_commands+=("info" "logits --ids 1,2")
for spec in "${model_commands[@]}"; do
  read -r -a words <<<"$spec"
  cmd=${words[0]}
  rest=("${words[@]:1}")
  expect_error "$cmd: missing file" "missing-model\.gguf" "$CHANNEL" "$cmd" -m "$missing" "${rest[@]}"
  expect_error "$cmd: empty file" "empty\.gguf" "$CHANNEL" "$cmd" -m "$empty" "${rest[@]}"
  expect_error "$cmd: garbage file" "garbage\.gguf.*(magic|not a gguf)|(magic|not a gguf).*garbage\.gguf" \
    "$CHANNEL" "$cmd" -m "$garbage" "${rest[@]}"
  expect_error "$cmd: wrong version" "version" "$CHANNEL" "$cmd" -m "$wrong_version" "${rest[@]}"
  expect_error "$cmd: a directory as the model" "$TMP|director" "$CHANNEL" "$cmd" -m "$TMP" "${rest[@]}"
done

# Without -m the built-in model is used; a binary built without one says so in one line.
rc=0
"$CHANNEL" run -n 1 -p hi >"$TMP/out" 2>"$TMP/err" </dev/null || rc=$?
if ((rc != 0)); then
  expect_error "run without -m and no built-in model" "no default model.*-m" "$CHANNEL" run -n 1 -p hi
  expect_error "tokenize without -m and no built-in model" "no default model.*-m" "$CHANNEL" tokenize hi
else
  echo "ok: run without -m uses the built-in model"
fi
finish
