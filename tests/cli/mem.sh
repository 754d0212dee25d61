#!/usr/bin/env bash
# `channel mem ls|show|stats|verify` on the stores of the memory fuzz corpus: tables and
# fields of valid stores, verify's exit codes, one-line errors for broken files.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
seeds="$(dirname "$0")/../fuzz/corpus/memory_fuzz"
require_command mem

expect_ok "mem ls" "$CHANNEL" mem ls "$seeds/valid_fp16.mem"
[[ $(wc -l <"$TMP/out") == 4 ]] || fail "mem ls: expected a header and 3 rows: $(cat "$TMP/out")"
grep -Eq '^ +2 +8 +3 .* P-- +episode 2 ' "$TMP/out" || fail "mem ls row of episode 2: $(cat "$TMP/out")"
grep -Eq '^ +1 .* --T ' "$TMP/out" || fail "mem ls: episode 1 has_tool: $(cat "$TMP/out")"
expect_ok "mem show" "$CHANNEL" mem show "$seeds/valid_fp16.mem" 1
grep -q '^parent  *0$' "$TMP/out" || fail "mem show parent: $(cat "$TMP/out")"
grep -q '^accesses  *1$' "$TMP/out" || fail "mem show accesses: $(cat "$TMP/out")"
grep -q '^checksum  *ok$' "$TMP/out" || fail "mem show checksum: $(cat "$TMP/out")"
expect_ok "mem stats" "$CHANNEL" mem stats "$seeds/valid_q8_0.mem"
grep -q '^slab type  *q8_0$' "$TMP/out" || fail "mem stats slab type: $(cat "$TMP/out")"
grep -q '^live episodes  *2 (1 pinned)$' "$TMP/out" || fail "mem stats live: $(cat "$TMP/out")"
expect_ok "mem verify" "$CHANNEL" mem verify "$seeds/valid_wrapped.mem"
grep -q '^ok: 3 live episodes' "$TMP/out" || fail "mem verify: $(cat "$TMP/out")"

expect_error "mem verify: damaged record" "verify found 1 problem" "$CHANNEL" mem verify "$seeds/invalid_checksum.mem"
grep -q 'checksum mismatch' "$TMP/out" || fail "mem verify did not list the problem: $(cat "$TMP/out")"
expect_error "mem verify: truncated" "verify found 1 problem" "$CHANNEL" mem verify "$seeds/invalid_truncated.mem"
expect_error "mem ls: bad magic" "bad magic" "$CHANNEL" mem ls "$seeds/invalid_magic.mem"
expect_error "mem show: missing episode" "episode 99 is not in the store" "$CHANNEL" mem show "$seeds/valid_fp16.mem" 99
expect_error "mem show: damaged" "checksum mismatch" "$CHANNEL" mem show "$seeds/invalid_checksum.mem" 1
expect_error "mem stats: missing file" "missing\.mem" "$CHANNEL" mem stats "$TMP/missing.mem"
expect_error "mem: no subcommand" "subcommand" "$CHANNEL" mem
finish
