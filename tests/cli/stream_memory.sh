#!/usr/bin/env bash
# `channel stream --memory FILE`: a text streamed through a small window is consolidated into
# a store that verifies and holds the whole text; a store of another model and a damaged
# store are one-line errors and stay as they were.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command stream
model="$TMP/micro.gguf"
# Six layers: layer 5 is global (the store keeps it), the others slide over 8 tokens.
"$CHANNEL" mkmodel --arch gemma3 --hidden 32 --layers 6 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --window 8 --vocab 300 -o "$model" >/dev/null 2>&1 || fail "mkmodel"
other="$TMP/other.gguf"
"$CHANNEL" mkmodel --arch gemma3 --hidden 32 --layers 6 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --window 8 --vocab 300 --seed 9 -o "$other" >/dev/null 2>&1 || fail "mkmodel other"
allsliding="$TMP/sliding.gguf"
"$CHANNEL" mkmodel --arch gemma3 --hidden 32 --layers 3 --heads 4 --kv-heads 2 --head-dim 8 \
  --ffn 48 --window 8 --vocab 300 -o "$allsliding" >/dev/null 2>&1 || fail "mkmodel sliding"
for i in $(seq 1 40); do echo "Sentence number $i is here. It has a second part."; done >"$TMP/text.txt"
store="$TMP/s.episodic.mem"
flags=(-m "$model" --slots 128 --recall-slots 16 -t 1 --stats-every 1000)

expect_ok "stream -f with --memory" "$CHANNEL" stream "${flags[@]}" -f "$TMP/text.txt" --memory "$store"
grep -q "memory .*: consolidated" "$TMP/err" || fail "no consolidation line: $(cat "$TMP/err")"
expect_ok "mem verify" "$CHANNEL" mem verify "$store"
expect_ok "mem ls" "$CHANNEL" mem ls "$store"
# (The micro model's synthetic vocabulary may render spaces as U+2581.)
grep -Eq "number.{1,3}1 is here" "$TMP/out" || fail "the first sentence is not stored: $(cat "$TMP/out")"
grep -Eq "number.{1,3}40 is here" "$TMP/out" || fail "the last sentence is not stored: $(cat "$TMP/out")"

# mem ls --json: one object per line, the fields of the table.
expect_ok "mem ls --json" "$CHANNEL" mem ls --json "$store"
python3 - "$TMP/out" <<'PY' || fail "mem ls --json: $(head -c 600 "$TMP/out")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
assert rows, "no episode"
assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)
for r in rows:
    assert set(r) >= {"id", "parent", "start_clock", "tokens", "salience", "accesses", "flags",
                      "summary"}, r
    assert r["tokens"] >= 1 and len(r["flags"]) == 3
assert rows[0]["parent"] is None and all(r["parent"] is not None for r in rows[1:])
PY

# --turns: each paragraph ends with a turn_end span, and trigger A cuts the episode there, so
# no episode holds the end of one paragraph and the start of the next.
for i in $(seq 1 12); do printf 'Paragraph %d begins. It ends here.\n\n' "$i"; done >"$TMP/paras.txt"
expect_ok "stream --turns" "$CHANNEL" stream "${flags[@]}" -f "$TMP/paras.txt" --turns \
  --memory "$TMP/turns.mem"
expect_ok "mem ls --json (turns)" "$CHANNEL" mem ls --json "$TMP/turns.mem"
python3 - "$TMP/out" <<'PY' || fail "--turns episodes: $(head -c 1500 "$TMP/out")"
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
text = "".join(r["summary"] for r in rows).replace("\u2581", " ")
assert len(re.findall(r"begins", text)) == 12, text
for r in rows:
    s = r["summary"].replace("\u2581", " ")
    assert len(re.findall(r"Paragraph", s)) <= 1, s      # never two paragraphs in one episode
    assert "Paragraph" not in s or s.index("Paragraph") < 3, s  # a paragraph starts an episode
PY
expect_error "--turns without -f" "--turns: needs" "$CHANNEL" stream "${flags[@]}" --turns

sum=$(md5sum <"$store")
expect_error "another model" "another model" "$CHANNEL" stream -m "$other" --slots 128 \
  --recall-slots 16 -t 1 --tokens 10 --memory "$store"
[[ $(md5sum <"$store") == "$sum" ]] || fail "a refused store was modified"
head -c 4000 "$store" >"$TMP/short.mem"
ssum=$(md5sum <"$TMP/short.mem")
expect_error "truncated store" "short.mem" "$CHANNEL" stream "${flags[@]}" --tokens 10 \
  --memory "$TMP/short.mem"
[[ $(md5sum <"$TMP/short.mem") == "$ssum" ]] || fail "a truncated store was modified"
expect_error "no global layer" "no global layer" "$CHANNEL" stream -m "$allsliding" --slots 128 \
  --recall-slots 16 -t 1 --tokens 10 --memory "$TMP/none.mem"
[[ ! -e "$TMP/none.mem" ]] || fail "a store was created for a model without global layers"
finish
