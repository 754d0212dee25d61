# Helpers for the CLI behaviour tests (sourced, not run: the suite only runs tests/cli/*.sh).
# Usage in a test: source "$(dirname "$0")/lib/cli_assert.bash" "$@"
# Arguments: <channel binary> <testdata dir>. Exit codes: 0 pass, 1 fail, 77 skip.

CHANNEL=${1:?usage: $0 <channel binary> <testdata dir>}
TESTDATA=${2:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILURES=0

fail() {
  echo "FAIL: $*" >&2
  FAILURES=$((FAILURES + 1))
}

skip_test() {
  echo "" >&2
  echo "*** SKIPPED: $* ***" >&2
  echo "" >&2
  exit 77
}

require_testdata() {
  [[ -n "$TESTDATA" && -f "$TESTDATA/MANIFEST.json" ]] ||
    skip_test "reference test data not found at '${TESTDATA}'"
}

# The subcommand names listed by `channel --help`.
list_commands() {
  "$CHANNEL" --help 2>/dev/null | awk '/^Subcommands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }'
}

# True when the binary has the subcommand.
has_command() {
  list_commands | grep -qx -- "$1"
}

# A test of a subcommand fails (never skips) when the binary lacks it.
require_command() {
  has_command "$1" || {
    echo "FAIL: channel --help lists no '$1' subcommand" >&2
    exit 1
  }
}

# expect_error DESCRIPTION REGEX COMMAND...: the command must exit non-zero without a
# signal, print exactly one line on stderr, and that line must match REGEX (grep -Ei).
expect_error() {
  local desc=$1 regex=$2
  shift 2
  local rc=0
  "$@" >"$TMP/out" 2>"$TMP/err" </dev/null || rc=$?
  local lines
  lines=$(awk 'END { print NR }' "$TMP/err")
  if ((rc == 0)); then
    fail "$desc: exit code 0, expected an error (stderr: $(head -c 300 "$TMP/err"))"
  elif ((rc >= 128)); then
    fail "$desc: killed by a signal (exit code $rc): $(head -c 300 "$TMP/err")"
  elif [[ "$lines" != 1 ]]; then
    fail "$desc: expected exactly one line on stderr, got $lines: $(head -c 600 "$TMP/err")"
  elif ! grep -Eiq -- "$regex" "$TMP/err"; then
    fail "$desc: stderr does not match /$regex/: $(cat "$TMP/err")"
  else
    echo "ok: $desc: $(cat "$TMP/err")"
  fi
}

# expect_ok DESCRIPTION COMMAND...: exit code 0; stdout is left in $TMP/out.
expect_ok() {
  local desc=$1
  shift
  local rc=0
  "$@" >"$TMP/out" 2>"$TMP/err" </dev/null || rc=$?
  if ((rc != 0)); then
    fail "$desc: exit code $rc: $(head -c 600 "$TMP/err")"
    return 1
  fi
  echo "ok: $desc"
}

finish() {
  if ((FAILURES > 0)); then
    echo "$FAILURES check(s) failed" >&2
    exit 1
  fi
  echo "all checks passed"
  exit 0
}

# expect_exit DESCRIPTION CODE COMMAND...: the command must exit with exactly CODE (2: a usage
# mistake, 1: a failure while working) and end stderr with its one "channel: error: " line
# (lines before it, such as the model's "loaded" line, are allowed).
expect_exit() {
  local desc=$1 code=$2
  shift 2
  local rc=0
  "$@" >"$TMP/out" 2>"$TMP/err" </dev/null || rc=$?
  if ((rc != code)); then
    fail "$desc: exit code $rc, expected $code: $(head -c 400 "$TMP/err")"
  elif [[ $(grep -c '^channel: error: ' "$TMP/err") != 1 ]] || ! tail -n 1 "$TMP/err" | grep -q '^channel: error: '; then
    fail "$desc: expected one 'channel: error: ' line: $(head -c 600 "$TMP/err")"
  else
    echo "ok: $desc (exit $code): $(tail -n 1 "$TMP/err")"
  fi
}

# make_micro_model PATH: a tiny random llama (2 layers, 300 tokens) for fast CLI runs.
make_micro_model() {
  "$CHANNEL" mkmodel --arch llama --hidden 32 --layers 2 --heads 4 --kv-heads 2 --head-dim 8 \
    --ffn 48 --vocab 300 -o "$1" "${@:2}" >/dev/null 2>&1 || fail "mkmodel $1"
}

# wait_for COMMAND...: retries the command every 0.1 s for up to 60 s; false if it never
# succeeded.
wait_for() {
  local i
  for ((i = 0; i < 600; ++i)); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}
