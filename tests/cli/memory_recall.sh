#!/usr/bin/env bash
# Automatic recall (issue 12): `channel stream --memory` recalls by itself at turn boundaries
# and prints JSON recall events; `channel run --memory` recalls by the prompt's last token
# with every method; a damaged episode met during recall is skipped with one warning and the
# run goes on; a full store replaces its oldest episodes and keeps verifying; a version 1
# store recalls by centroid with a notice; --replay feeds an episode into the conversation.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command stream
model="$TMP/micro.gguf"
# Six layers: layer 5 is global; a random retrieval head of dim 16.
"$CHANNEL" mkmodel --arch gemma3 --hidden 32 --layers 6 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --window 8 --vocab 300 --retrieval-dim 16 -o "$model" >/dev/null 2>&1 ||
  fail "mkmodel"
for i in $(seq 1 30); do printf 'Paragraph %d tells of item %d and place %d.\n\n' "$i" "$i" "$i"; done \
  >"$TMP/paras.txt"
store="$TMP/s.mem"
flags=(-m "$model" --slots 96 --recall-slots 48 -t 1)
sflags=("${flags[@]}" --stats-every 100000)

expect_ok "stream --turns with automatic recall" "$CHANNEL" stream "${sflags[@]}" \
  -f "$TMP/paras.txt" --turns --memory "$store" --recall-k 2
# The writer runs beside the stream (and this model is fast): stream again over the full store.
expect_ok "stream again, the store full" "$CHANNEL" stream "${sflags[@]}" \
  -f "$TMP/paras.txt" --turns --memory "$store" --recall-k 2
python3 - "$TMP/out" <<'PY' || fail "recall events: $(head -c 1500 "$TMP/out")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if '"event":"recall"' in l]
# A turn's recall is skipped while the previous one still runs (the stream never waits), so
# how many of the 30 turns recall depends on the machine's load: at least one, at most 30.
assert 1 <= len(ev) <= 30, len(ev)
for e in ev:
    assert set(e) >= {"event", "reason", "method", "clock", "hits", "recalled", "kept",
                      "released", "neighbours", "skipped", "query_ms", "recall_ms"}, e
    assert e["reason"] == "turn" and e["method"] == "proj", e
    assert len(e["hits"]) <= 2 and all({"id", "score"} <= set(h) for h in e["hits"]), e
assert any(e["recalled"] for e in ev), "nothing ever recalled"
PY
expect_ok "mem verify" "$CHANNEL" mem verify "$store"
expect_ok "mem stats" "$CHANNEL" mem stats "$store"
grep -Eq "^version +3" "$TMP/out" || fail "not a version 3 store: $(cat "$TMP/out")"
grep -Eq "^lexical index +stored \(lexical section\)" "$TMP/out" ||
  fail "no lexical section: $(cat "$TMP/out")"
grep -Eq "^retrieval +keys \(R 8 per KV head\), projected vectors \(d_r 16\)" "$TMP/out" ||
  fail "retrieval kinds: $(cat "$TMP/out")"
expect_ok "--no-auto-recall" "$CHANNEL" stream "${sflags[@]}" -f "$TMP/paras.txt" --turns \
  --memory "$TMP/quiet.mem" --no-auto-recall
! grep -q '"event":"recall"' "$TMP/out" || fail "--no-auto-recall still recalled"

# run: the prompt's last token is the cue; each method answers.
for m in auto centroid keys proj hybrid; do
  expect_ok "run --recall-method $m" "$CHANNEL" run "${flags[@]}" --memory "$store" \
    --recall-only --temp 0 -n 2 --recall-method "$m" -p "Which place goes with item 7?"
  want=$m
  [[ $m == auto ]] && want=proj
  grep -Eq "memory .*: turn recall \($want\) at clock [0-9]+: recalled: [0-9]+ \(" "$TMP/err" ||
    fail "run $m: $(cat "$TMP/err")"
done
expect_ok "mem query --recall-method keys" "$CHANNEL" mem query -m "$model" --json -k 3 \
  --recall-method keys "$store" --text "Which place goes with item 7?"
python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; assert len(r)==3 and r[0]["method"]=="keys" and "score" in r[0], r' \
  "$TMP/out" || fail "mem query keys: $(cat "$TMP/out")"
expect_error "bad --recall-method" "recall-method" "$CHANNEL" run "${flags[@]}" --memory "$store" \
  -p hi --recall-method nearest

# A saved session and its store: the question recalls before its last token is computed (the
# new session keeps one probe slot, and the resumed one gets it back from the file).
expect_ok "stream --session --memory" "$CHANNEL" stream "${sflags[@]}" -f "$TMP/paras.txt" \
  --turns --memory "$TMP/sess.mem" --session "$TMP/s.session"
expect_ok "run on the saved session" "$CHANNEL" run "${flags[@]}" --session "$TMP/s.session" \
  --memory "$TMP/sess.mem" --recall-only --temp 0 -n 2 -p "Which place goes with item 7?"
grep -Eq "memory .*: turn recall \(proj\) at clock [0-9]+: recalled: [0-9]+ \(" "$TMP/err" ||
  fail "run --session: $(cat "$TMP/err")"

# --replay: the episode's tokens enter the conversation before the prompt.
expect_ok "run --replay" "$CHANNEL" run "${flags[@]}" --memory "$store" --recall-only -n 1 \
  --replay 3 -p "Go on."
grep -Eq "replayed episode 3 \([0-9]+ tokens\)" "$TMP/err" || fail "replay: $(cat "$TMP/err")"
expect_error "--replay of a missing episode" "no episode 999999" "$CHANNEL" run "${flags[@]}" \
  --memory "$store" --recall-only --replay 999999 -p hi
expect_error "--replay without --memory" "needs --memory" "$CHANNEL" run -m "$model" -p hi \
  --replay 1

# A damaged episode: flip a byte of every stored record's K/V; recall skips each with one
# warning and the run still answers. Nothing is rewritten.
cp "$store" "$TMP/damaged.mem"
python3 - "$TMP/damaged.mem" <<'PY' || fail "damaging the store"
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
_, ver, flags, L, hidden, kv, maxe, _, total, head, _, maxt, _ = struct.unpack_from("<4sIIIIIIIQQQII", b)
up = lambda x: (x + 63) // 64 * 64
entry = up(64 + 2 * hidden)
slab = up(64 + maxe * entry)
row = 2 * kv
block_kv = up(320 + 4 * maxt)
stride = up(block_kv + 2 * L * maxt * row)
for s in range(maxe):
    if struct.unpack_from("<I", b, 64 + s * entry + 40)[0] == 0:
        continue
    b[slab + s * stride + block_kv + 5] ^= 0x20
open(p, "wb").write(b)
PY
dsum=$(md5sum <"$TMP/damaged.mem")
expect_ok "run over damaged episodes" "$CHANNEL" run "${flags[@]}" --memory "$TMP/damaged.mem" \
  --recall-only --temp 0 -n 3 -p "Which place goes with item 7?"
grep -Eq "warning: episodic: .*episode [0-9]+ skipped: .*checksum mismatch" "$TMP/err" ||
  fail "no skip warning: $(cat "$TMP/err")"
grep -q "generation 3 tokens" "$TMP/err" || fail "the run did not go on: $(cat "$TMP/err")"
[[ $(md5sum <"$TMP/damaged.mem") == "$dsum" ]] || fail "a recall-only run modified the store"

# A full store: 4 slots, 30 paragraphs; the oldest are replaced, the newest stay, it verifies.
expect_ok "full store" "$CHANNEL" stream "${sflags[@]}" -f "$TMP/paras.txt" --turns \
  --memory "$TMP/full.mem" --memory-capacity 4
expect_ok "mem verify (full)" "$CHANNEL" mem verify "$TMP/full.mem"
expect_ok "mem ls (full)" "$CHANNEL" mem ls --json "$TMP/full.mem"
python3 - "$TMP/out" <<'PY' || fail "full store: $(cat "$TMP/out")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 4, len(rows)
ids = [r["id"] for r in rows]
assert ids == list(range(ids[0], ids[0] + 4)) and ids[0] > 20, ids
PY

# A version 2 store (no lexical section) is still written and recalled from, lexical half on.
expect_ok "mem create --v2" "$CHANNEL" mem create -m "$model" --v2 --capacity 64 "$TMP/v2.mem"
expect_ok "stream into a v2 store" "$CHANNEL" stream "${sflags[@]}" -f "$TMP/paras.txt" --turns \
  --memory "$TMP/v2.mem"
grep -q '"event":"recall"' "$TMP/out" || fail "v2 store: no recall events"
expect_ok "mem stats (v2)" "$CHANNEL" mem stats "$TMP/v2.mem"
grep -Eq "^version +2" "$TMP/out" || fail "not a version 2 store: $(cat "$TMP/out")"
expect_ok "run over a v2 store" "$CHANNEL" run "${flags[@]}" --memory "$TMP/v2.mem" \
  --recall-only --temp 0 -n 2 -p "Which place goes with item 7?"
grep -Eq "memory .*: turn recall \(proj\) at clock [0-9]+: recalled: [0-9]+ \(" "$TMP/err" ||
  fail "run over a v2 store: $(cat "$TMP/err")"

# A version 1 store: recall by centroid, with a notice.
expect_ok "mem create --v1" "$CHANNEL" mem create -m "$model" --v1 --capacity 64 "$TMP/v1.mem"
expect_ok "stream into a v1 store" "$CHANNEL" stream "${sflags[@]}" -f "$TMP/paras.txt" --turns \
  --memory "$TMP/v1.mem"
grep -q "note: episodic: .*v1.mem is a version 1 store" "$TMP/err" || fail "no v1 notice: $(cat "$TMP/err")"
grep -q '"method":"centroid"' "$TMP/out" || fail "v1 store did not recall by centroid"
expect_ok "mem verify (v1)" "$CHANNEL" mem verify "$TMP/v1.mem"
expect_error "keys on a v1 store" "keeps no representative keys" "$CHANNEL" run "${flags[@]}" \
  --memory "$TMP/v1.mem" --recall-only --recall-method keys -p hi
finish
