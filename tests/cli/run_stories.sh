#!/usr/bin/env bash
# `run` and `bench` on stories260K: greedy text equals the
# reference generation, a seed reproduces its text, and the commands' output formats.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_testdata
model="$TESTDATA/stories260K/stories260K.gguf"
[[ -f "$model" ]] || skip_test "$model not found"
command -v python3 >/dev/null || skip_test "python3 is needed to read greedy.json"

# Greedy: stdout is the prompt plus the continuation; llama2.c's reference stdout has
# the same shape, so ours must be a prefix of it (we stop after 60 of its 200 tokens).
for prompt in "Once upon a time" "Lily and Tom went"; do
  python3 - "$TESTDATA/stories260K/greedy.json" "$prompt" >"$TMP/expected" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
case = next(c for c in cases if c["prompt"] == sys.argv[2])
sys.stdout.write(case["llama2c"]["stdout"])
PY
  if expect_ok "run greedy '$prompt'" "$CHANNEL" run -m "$model" -p "$prompt" --temp 0 -n 60 -t 1; then
    got=$(cat "$TMP/out")
    expected=$(cat "$TMP/expected")
    if [[ ${#got} -lt 100 || "$expected" != "$got"* ]]; then
      fail "greedy '$prompt': output is not a prefix of the reference text"
      echo "  got:      $got" >&2
      echo "  expected: ${expected:0:${#got}}" >&2
    fi
  fi
done

# The same seed gives the same text; a different seed (almost surely) another.
run_seed() { "$CHANNEL" run -m "$model" -p "Once upon a time" -n 80 --temp 1.0 --seed "$1" 2>/dev/null; }
a=$(run_seed 7)
b=$(run_seed 7)
c=$(run_seed 8)
[[ -n "$a" && "$a" == "$b" ]] || fail "seed 7 gave different texts: '$a' vs '$b'"
[[ "$a" != "$c" ]] || fail "seeds 7 and 8 gave the same text: '$a'"
# Thread count does not change the text.
d=$("$CHANNEL" run -m "$model" -p "Once upon a time" -n 80 --temp 1.0 --seed 7 -t 2 2>/dev/null)
[[ "$a" == "$d" ]] || fail "-t 2 changed the seeded text"
echo "ok: seeded sampling is reproducible"

# stderr ends with the prompt and generation speed.
"$CHANNEL" run -m "$model" -p "Once" -n 8 >/dev/null 2>"$TMP/err" || fail "run -n 8 failed: $(cat "$TMP/err")"
grep -Eq "prompt .*tok/s.*generation .*tok/s" "$TMP/err" || fail "no speed line on stderr: $(cat "$TMP/err")"
# --no-echo prints only the continuation.
"$CHANNEL" run -m "$model" -p "Once upon a time" --temp 0 -n 5 --no-echo >"$TMP/out" 2>/dev/null
[[ "$(cat "$TMP/out")" == ", there was a"* ]] || fail "--no-echo printed '$(cat "$TMP/out")'"

# bench: a table on stderr, JSON with the four speeds, the device and the depth on the last
# stdout line; the prompt's GFLOP/s is its tokens per second times its operations a token.
if expect_ok "bench" "$CHANNEL" bench -m "$model" -p 32 -n 8 -r 2 -t 1; then
  tail -n 1 "$TMP/out" | python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
speeds = {"prompt_tok_per_s", "prompt_gflop_per_s", "gen_tok_per_s", "gen_gb_per_s"}
assert set(d) == speeds | {"device", "depth"}, d
assert all(isinstance(d[k], (int, float)) and d[k] > 0 for k in speeds), d
assert d["device"] == "cpu" and d["depth"] == 0, d
# stories260K: 5 layers of 45,312 multiply-adds (q 64x64, k and v 64x32, o 64x64, gate, up
# and down 64x172), the LM head (512 x 64) once for the 32 tokens, and attention: 8 heads x
# (8 + 8) x 16.5 keys on average, a layer.
per_token = 2 * (5 * 45312 + 512 * 64 / 32 + 5 * 8 * 16 * 16.5)
assert abs(d["prompt_gflop_per_s"] / d["prompt_tok_per_s"] * 1e9 - per_token) < 1, d
' || fail "bench JSON line: $(tail -n 1 "$TMP/out")"
  grep -q "pp32" "$TMP/err" && grep -q "tg8" "$TMP/err" || fail "bench table: $(cat "$TMP/err")"
fi
finish
