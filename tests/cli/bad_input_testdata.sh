#!/usr/bin/env bash
# Bad input around a real model (stories260K from the reference data): truncated files,
# a wrong version in an otherwise valid file, token ids outside the vocabulary, a prompt
# longer than the context. One line on stderr, non-zero exit, no signal.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_testdata
model="$TESTDATA/stories260K/stories260K.gguf"
[[ -f "$model" ]] || skip_test "$model not found"
size=$(stat -c %s "$model")

# Truncated copies: inside the header, the metadata, the tensor table and the tensor data.
for n in 3 20 100 2000 30000 $((size / 2)) $((size - 1)); do
  truncated="$TMP/truncated-$n.gguf"
  head -c "$n" "$model" >"$truncated"
  expect_error "run: truncated to $n bytes" "truncated-$n\.gguf" "$CHANNEL" run -m "$truncated" -n 1
  expect_error "tokenize: truncated to $n bytes" "truncated-$n\.gguf" "$CHANNEL" tokenize -m "$truncated" hi
done
for n in 100 $((size / 2)); do
  truncated="$TMP/truncated-$n.gguf"
  expect_error "bench: truncated to $n bytes" "truncated-$n\.gguf" "$CHANNEL" bench -m "$truncated" -p 4 -n 2 -r 1
  expect_error "detokenize: truncated to $n bytes" "truncated-$n\.gguf" \
    "$CHANNEL" detokenize -m "$truncated" --ids 1,2
done

# The real file with its version field (bytes 4..7) set to 1, then to 7.
for v in 1 7; do
  patched="$TMP/version-$v.gguf"
  cp "$model" "$patched"
  printf "\\x0$v" | dd of="$patched" bs=1 seek=4 conv=notrunc status=none
  expect_error "run: GGUF version $v" "version" "$CHANNEL" run -m "$patched" -n 1
  expect_error "tokenize: GGUF version $v" "version" "$CHANNEL" tokenize -m "$patched" hi
done

# Token ids outside the 512-token vocabulary.
expect_error "detokenize: id 512" "512.*vocab" "$CHANNEL" detokenize -m "$model" --ids 1,512
expect_error "detokenize: id 99999999" "99999999" "$CHANNEL" detokenize -m "$model" --ids 99999999
expect_error "logits: id 4096" "4096" "$CHANNEL" logits -m "$model" --ids 1,4096

# A prompt longer than the context.
long_prompt=$(printf 'Once upon a time there was a dog. %.0s' {1..20})
expect_error "run: prompt longer than --ctx 16" "prompt.*context" \
  "$CHANNEL" run -m "$model" --ctx 16 -n 4 -p "$long_prompt"
# Without --ctx, run is on the slot ring: a prompt longer than the model's context is fed
# through it (the oldest spans are evicted), not refused.
very_long=$(printf 'The little dog ran and ran. %.0s' {1..400})
"$CHANNEL" run -m "$model" -n 4 --no-echo -p "$very_long" >"$TMP/out" 2>"$TMP/err" ||
  fail "run on the ring refused a long prompt: $(cat "$TMP/err")"
grep -Eq "prompt [0-9]{4,} tokens.*clock [0-9]{4,}" "$TMP/err" || fail "long prompt on the ring: $(cat "$TMP/err")"
finish
