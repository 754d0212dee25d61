#!/usr/bin/env bash
# Bad paths and values are refused before they cost anything: a session or store that could
# not be written is refused before generation, a geometry that fails leaves no new store behind,
# a directory where a file is expected is "DIR is a directory", empty paths are errors, -t above
# the hardware threads is capped with a warning, a --slots the machine cannot hold is refused
# with the memory it needs, and a --draft typo names the valid choices.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command run
model="$TMP/micro.gguf"
make_micro_model "$model"
# A gemma3 model with a sliding window of 8 (layer 5 is global): 40 slots cannot hold the
# window plus a batch of spare slots.
gemma="$TMP/gemma.gguf"
"$CHANNEL" mkmodel --arch gemma3 --hidden 64 --layers 6 --heads 2 --kv-heads 1 --head-dim 32 \
  --ffn 64 --window 8 --vocab 300 -o "$gemma" >/dev/null 2>&1 || fail "mkmodel gemma"
geo=(--slots 96 --recall-slots 8 -t 1)
echo "Some text for the model to read." >"$TMP/text.txt"
mkdir -p "$TMP/dir"

# Unwritable outputs are found before the first token (-n is far more than this could run).
expect_exit "run --session in a missing directory" 1 timeout 30 "$CHANNEL" run -m "$model" \
  "${geo[@]}" -n 100000000 -p hi --session "$TMP/nodir/x.session"
grep -q "nodir.*does not exist" "$TMP/err" || fail "the message does not name the directory"
expect_exit "run --memory in a missing directory" 1 timeout 30 "$CHANNEL" run -m "$model" \
  "${geo[@]}" -n 100000000 -p hi --memory "$TMP/nodir/x.mem"
expect_exit "stream --session in a missing directory" 1 timeout 30 "$CHANNEL" stream -m "$model" \
  "${geo[@]}" --tokens 100000000 --session "$TMP/nodir/x.session"
chmod 555 "$TMP/dir"
if [[ ! -w "$TMP/dir" ]]; then  # (root ignores the mode)
  expect_exit "run --session in a read-only directory" 1 timeout 30 "$CHANNEL" run -m "$model" \
    "${geo[@]}" -n 100000000 -p hi --session "$TMP/dir/x.session"
fi
chmod 755 "$TMP/dir"

# Validate first, create files last: a geometry that fails leaves no store behind.
expect_exit "run --memory NEW with a geometry too small" 1 "$CHANNEL" run -m "$gemma" \
  --memory "$TMP/new.mem" --slots 40 --recall-slots 30 -t 1 -p hi
[[ ! -e "$TMP/new.mem" ]] || fail "a refused run left the store $(ls -la "$TMP/new.mem")"
expect_exit "stream --memory NEW with a geometry too small" 1 "$CHANNEL" stream -m "$gemma" \
  --memory "$TMP/new2.mem" --slots 40 --recall-slots 30 -t 1 --tokens 4
[[ ! -e "$TMP/new2.mem" ]] || fail "a refused stream left the store $(ls -la "$TMP/new2.mem")"

# A directory where a file is expected.
for spec in "stream -m $model -f" "stream -m $model --tokens 2 --system" \
  "perplexity -m $model -f" "mem verify" "mem ls" "run -m $model -f" \
  "run -m $model -n 1 -p hi --session" "run -m $model -n 1 -p hi --memory" \
  "stream -m $model --tokens 2 --session"; do
  read -r -a words <<<"$spec"
  expect_exit "${words[*]:0:2} ... ${words[-1]} DIR" 1 "$CHANNEL" "${words[@]}" "$TMP/dir"
  grep -q "$TMP/dir is a directory" "$TMP/err" || fail "not 'DIR is a directory': $(cat "$TMP/err")"
done

# Empty paths are usage errors, not a silent fallback to the built-in model or no file.
expect_exit "run -m ''" 2 "$CHANNEL" run -m "" -p hi
expect_exit "stream -m ''" 2 "$CHANNEL" stream -m "" --tokens 1
expect_exit "run --session ''" 2 "$CHANNEL" run -m "$model" -p hi --session ""
expect_exit "run --memory ''" 2 "$CHANNEL" run -m "$model" -p hi --memory ""
expect_exit "stream --memory ''" 2 "$CHANNEL" stream -m "$model" --tokens 1 --memory ""
grep -q -- "--memory: empty" "$TMP/err" || fail "empty --memory: $(cat "$TMP/err")"

# -t above the hardware threads: a warning, and the run goes on with the cap.
hw=$(nproc)
if expect_ok "run -t 100000" "$CHANNEL" run -m "$model" -t 100000 -n 2 -p hi; then
  grep -q "^channel: warning: -t: 100000 threads capped to the $hw hardware threads" "$TMP/err" ||
    fail "-t 100000: no warning: $(cat "$TMP/err")"
fi

# --slots beyond the machine: refused with the memory the geometry needs, before allocating.
expect_exit "run --slots 2^30" 1 "$CHANNEL" run -m "$model" --slots 1073741824 -t 1 -p hi --session "$TMP/s.session"
grep -Eq "1073741824 slots need [0-9.]+ GiB .* more than the [0-9.]+ GiB of memory" "$TMP/err" ||
  fail "--slots: the message does not give the sizes: $(cat "$TMP/err")"
[[ ! -e "$TMP/s.session" ]] || fail "a refused run wrote a session"
expect_exit "stream --slots 2^30" 1 "$CHANNEL" stream -m "$model" --slots 1073741824 -t 1 --tokens 2

# --draft: a typo names the valid choices.
expect_exit "run --draft ngrms" 2 "$CHANNEL" run -m "$model" --draft ngrms -p hi
grep -q "'ngram'" "$TMP/err" || fail "--draft typo: the choices are not named: $(cat "$TMP/err")"
finish
