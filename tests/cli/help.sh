#!/usr/bin/env bash
# `--help` works on the program and on every subcommand (exit 0, a usage text on stdout),
# and `--version` prints the version.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"

expect_ok "channel --help" "$CHANNEL" --help && grep -q "Subcommands:" "$TMP/out" ||
  fail "channel --help lists no subcommands"
# The subcommand names: the indented lines after "Subcommands:".
mapfile -t commands < <(list_commands)
((${#commands[@]} > 0)) || fail "no subcommands found in 'channel --help'"
for required in run bench tokenize detokenize; do
  [[ " ${commands[*]} " == *" $required "* ]] || fail "subcommand '$required' missing from --help"
done
for cmd in "${commands[@]}"; do
  if expect_ok "channel $cmd --help" "$CHANNEL" "$cmd" --help; then
    grep -qi "usage" "$TMP/out" || fail "channel $cmd --help printed no usage: $(head -c 300 "$TMP/out")"
  fi
done
expect_ok "channel --version" "$CHANNEL" --version && grep -q "channel" "$TMP/out" ||
  fail "--version printed: $(cat "$TMP/out")"
finish
