#!/usr/bin/env bash
# --device: a bad name is a usage mistake (exit 2, one line); `cuda` either fails while working
# with one "cuda: ..." line (a CUDA build: no driver, no device, or a head size the kernels do not
# take, as this micro model's 8) or, in a build without the backend, is a usage mistake that
# says so. Never a crash, never a hang. `run` takes it on a contiguous context (--ctx) and on
# the slot ring alike.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command bench
model="$TMP/micro.gguf"
make_micro_model "$model"

# NAME CMD...: `--device cuda` ends in exactly one error line, as the header says
expect_cuda_refused() {
  local name=$1 rc=0 last
  shift
  "$@" >"$TMP/out" 2>"$TMP/err" </dev/null || rc=$?
  last=$(tail -n 1 "$TMP/err")
  if ((rc == 1)) && [[ $last == "channel: error: cuda: "* ]]; then
    echo "ok: $name (exit 1): $last"
  elif ((rc == 2)) && [[ $last == *"no CUDA backend"* ]]; then
    echo "ok: $name without the backend (exit 2): $last"
  else
    fail "$name: exit $rc: $(head -c 600 "$TMP/err")"
  fi
  [[ $(grep -c '^channel: error: ' "$TMP/err") == 1 ]] || fail "$name: not one error line"
}

for cmd in bench logits run; do
  extra=()
  [[ $cmd == logits ]] && extra=(--ids 1,2,3)
  [[ $cmd == bench ]] && extra=(-p 4 -n 2 -r 1)
  [[ $cmd == run ]] && extra=(--ctx 32 -p "hello" -n 2)
  for bad in gpu cuda: cuda:x cuda:-1 CPU; do
    expect_exit "$cmd --device $bad" 2 "$CHANNEL" "$cmd" -m "$model" --device "$bad" "${extra[@]}"
    grep -q "^channel: error: --device: " "$TMP/err" || fail "$cmd --device $bad: not in the '--device: ...' style: $(cat "$TMP/err")"
  done
  expect_cuda_refused "$cmd --device cuda" "$CHANNEL" "$cmd" -m "$model" --device cuda "${extra[@]}"
  expect_ok "$cmd --device cpu" "$CHANNEL" "$cmd" -m "$model" --device cpu "${extra[@]}"
done

# run and stream on the slot ring (no --ctx)
expect_cuda_refused "run --device cuda on the ring" "$CHANNEL" run -m "$model" --device cuda -p hello -n 2
printf 'hello world\n' >"$TMP/text.txt"
expect_cuda_refused "stream --device cuda" "$CHANNEL" stream -m "$model" --device cuda -f "$TMP/text.txt"

# mem add and mem query run the model too; the store is checked before any upload.
expect_ok "mem create" "$CHANNEL" mem create -m "$model" "$TMP/m.mem"
expect_cuda_refused "mem add --device cuda" "$CHANNEL" mem add -m "$model" --device cuda --text "hello world" "$TMP/m.mem"
expect_ok "mem add --device cpu" "$CHANNEL" mem add -m "$model" --device cpu --text "hello world" "$TMP/m.mem"
expect_cuda_refused "mem query --device cuda" "$CHANNEL" mem query -m "$model" --device cuda --text "hello" "$TMP/m.mem"
expect_ok "mem query --device cpu" "$CHANNEL" mem query -m "$model" --device cpu --text "hello" "$TMP/m.mem"
grep -q "hello world" "$TMP/out" || fail "mem query --device cpu: $(cat "$TMP/out")"
expect_exit "mem add --device gpu" 2 "$CHANNEL" mem add -m "$model" --device gpu --text hi "$TMP/m.mem"
finish
