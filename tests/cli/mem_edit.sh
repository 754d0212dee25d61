#!/usr/bin/env bash
# A damaged episode is not the end: `mem verify` names it, `mem repair` drops the damaged
# records and keeps the rest (writing nothing but the dropped entries' token counts: no
# undamaged byte changes), `mem rm ID` removes one episode, `mem pin ID` / `mem unpin ID`
# protect one from eviction. Each leaves a store that verifies.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command mem
seeds="$(dirname "$0")/../fuzz/corpus/memory_fuzz"
cp "$seeds/invalid_checksum.mem" "$TMP/bad.mem"
cp "$seeds/valid_fp16.mem" "$TMP/good.mem"

# bytes_changed A B: how many bytes differ.
bytes_changed() { cmp -l "$1" "$2" | wc -l; }

expect_exit "verify names the damaged episode" 1 "$CHANNEL" mem verify "$TMP/bad.mem"
grep -q "damaged episodes: 1" "$TMP/err" || fail "verify's error does not name episode 1: $(cat "$TMP/err")"
grep -q "mem repair" "$TMP/err" || fail "verify does not point to mem repair: $(cat "$TMP/err")"
grep -q "^damaged episodes: 1$" "$TMP/out" || fail "verify's report does not list episode 1: $(cat "$TMP/out")"

# --dry-run: says what it would drop, writes nothing.
expect_ok "repair --dry-run" "$CHANNEL" mem repair --dry-run "$TMP/bad.mem"
grep -q "would drop: slab of episode 1" "$TMP/out" || fail "repair --dry-run: $(cat "$TMP/out")"
cmp -s "$seeds/invalid_checksum.mem" "$TMP/bad.mem" || fail "repair --dry-run wrote to the store"

expect_ok "repair" "$CHANNEL" mem repair "$TMP/bad.mem"
grep -q "1 damaged record(s) dropped, 2 episodes kept" "$TMP/out" || fail "repair: $(cat "$TMP/out")"
n=$(bytes_changed "$seeds/invalid_checksum.mem" "$TMP/bad.mem")
((n >= 1 && n <= 4)) || fail "repair changed $n bytes; only the dropped entry's token_count may change"
expect_ok "verify after repair" "$CHANNEL" mem verify "$TMP/bad.mem"
grep -q "^ok: 2 live episodes" "$TMP/out" || fail "verify after repair: $(cat "$TMP/out")"
expect_ok "ls after repair" "$CHANNEL" mem ls --json "$TMP/bad.mem"
[[ $(grep -c '"id":' "$TMP/out") == 2 ]] && ! grep -q '"damaged"' "$TMP/out" || fail "ls after repair: $(cat "$TMP/out")"
cp "$TMP/bad.mem" "$TMP/repaired.mem"
expect_ok "a second repair finds nothing" "$CHANNEL" mem repair "$TMP/bad.mem"
grep -q "0 damaged record(s) dropped, 2 episodes kept" "$TMP/out" || fail "second repair: $(cat "$TMP/out")"
cmp -s "$TMP/bad.mem" "$TMP/repaired.mem" || fail "a repair of a sound store wrote to it"
expect_exit "repair of a damaged header" 1 "$CHANNEL" mem repair "$seeds/invalid_magic.mem"

# rm: one episode goes, the others stay byte for byte.
expect_ok "rm 1" "$CHANNEL" mem rm "$TMP/good.mem" 1
grep -q "removed episode 1; 2 episodes left" "$TMP/out" || fail "rm: $(cat "$TMP/out")"
n=$(bytes_changed "$seeds/valid_fp16.mem" "$TMP/good.mem")
((n >= 1 && n <= 4)) || fail "rm changed $n bytes"
expect_ok "verify after rm" "$CHANNEL" mem verify "$TMP/good.mem"
grep -q "^ok: 2 live episodes" "$TMP/out" || fail "verify after rm: $(cat "$TMP/out")"
expect_exit "rm of an id not stored" 1 "$CHANNEL" mem rm "$TMP/good.mem" 1
grep -q "episode 1 is not in the store" "$TMP/err" || fail "rm twice: $(cat "$TMP/err")"

# pin / unpin: the P flag in ls, the file still verifies.
expect_ok "pin 0" "$CHANNEL" mem pin "$TMP/good.mem" 0
expect_ok "ls" "$CHANNEL" mem ls "$TMP/good.mem"
grep -Eq '^ +0 .* P-- ' "$TMP/out" || fail "episode 0 is not pinned: $(cat "$TMP/out")"
expect_ok "unpin 2" "$CHANNEL" mem unpin "$TMP/good.mem" 2
expect_ok "ls" "$CHANNEL" mem ls "$TMP/good.mem"
grep -Eq '^ +2 .* --- ' "$TMP/out" || fail "episode 2 is still pinned: $(cat "$TMP/out")"
expect_ok "verify after pin/unpin" "$CHANNEL" mem verify "$TMP/good.mem"
finish
