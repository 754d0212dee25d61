#!/usr/bin/env bash
# `channel chat` through a pipe, on the built-in model (Channel's template): the system
# prompt is in the anchors (a fact in it is answered), multi-line input (\ and """), /stats,
# /tool, /memory, --session across restarts, a ring small enough to evict and go on, and
# bad input (YAML front matter, template names, commands) as one-line errors.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command chat
sys="$TMP/sys.md"
printf 'Remember this: the access code of Vera Okafor is 48213.\n' >"$sys"
chat=("$CHANNEL" chat --temp 0 -n 24 -t 1 --system "$sys")

printf 'What is the access code of Vera Okafor?\n' | "${chat[@]}" >"$TMP/out" 2>"$TMP/err" ||
  fail "chat: $(cat "$TMP/err")"
[[ $(cat "$TMP/out") == "48213." ]] || fail "the fact in the system prompt was not answered: $(cat "$TMP/out")"
grep -q "chat template channel, 0 tools" "$TMP/err" || fail "template line: $(cat "$TMP/err")"

# Three messages (one plain, one continued with \, one """ block) give three reply lines.
printf 'What is a dog?\nWhat is \\\na cat?\n"""\nTwo lines\nof question?\n"""\n/stats\n' |
  "${chat[@]}" >"$TMP/out" 2>"$TMP/err" || fail "multi-line: $(cat "$TMP/err")"
[[ $(grep -vc '^clock ' "$TMP/out") == 3 ]] || fail "expected 3 replies: $(cat "$TMP/out")"
grep -Eq '^clock [0-9]+ \| slots 4096: anchors [0-9]+, window [0-9]+/[0-9]+, recall 0/128 .* \| turns 3$' \
  "$TMP/out" || fail "/stats: $(cat "$TMP/out")"

# A conversation kept in a session file goes on after a restart.
printf 'What is the access code of Vera Okafor?\n' |
  "${chat[@]}" --session "$TMP/c.session" >"$TMP/out" 2>"$TMP/err" || fail "session 1: $(cat "$TMP/err")"
clock1=$(sed -n 's/.*saved .* at clock \([0-9]*\).*/\1/p' "$TMP/err")
[[ -n "$clock1" ]] || fail "no saved clock: $(cat "$TMP/err")"
printf 'And again?\n/stats\n' | "${chat[@]}" --session "$TMP/c.session" >"$TMP/out" 2>"$TMP/err" ||
  fail "session 2: $(cat "$TMP/err")"
grep -q "resumed $TMP/c.session" "$TMP/err" || fail "not resumed: $(cat "$TMP/err")"
clock2=$(sed -n 's/^clock \([0-9]*\) .*/\1/p' "$TMP/out")
((clock2 > clock1)) || fail "the clock did not go on: $clock1 -> $clock2"

# A small ring evicts old turns and the chat goes on; the anchors stay.
for i in $(seq 1 40); do echo "Question $i: what does the word harbour mean in this text?"; done >"$TMP/many"
echo "What is the access code of Vera Okafor?" >>"$TMP/many"
echo "/stats" >>"$TMP/many"
"$CHANNEL" chat --temp 0 -n 8 -t 1 --system "$sys" --slots 640 <"$TMP/many" >"$TMP/out" 2>"$TMP/err" || fail "small ring: $(cat "$TMP/err")"
evicted=$(sed -n 's/.* \([0-9]*\) evicted .*/\1/p' "$TMP/out")
((evicted > 0)) || fail "nothing was evicted: $(tail -1 "$TMP/out")"
[[ $(tail -2 "$TMP/out" | head -1) == "48213." ]] || fail "the anchors were lost after evictions: $(tail -3 "$TMP/out")"

# Tools: the front matter is rendered into the anchors; /tool appends a result and the model replies.
cat >"$TMP/tools.md" <<'MD'
---
tools:
  - name: lookup
    description: Look a word up in the dictionary.
    parameters:
      type: object
      properties:
        word: {type: string}
      required: [word]
---
You answer questions about words.
MD
printf 'What is a lamp?\n/tool lookup A lamp is a device that gives light.\n/stats\n' |
  "$CHANNEL" chat --temp 0 -n 16 -t 1 --system "$TMP/tools.md" >"$TMP/out" 2>"$TMP/err" ||
  fail "tools: $(cat "$TMP/err")"
grep -q "chat template channel, 1 tools" "$TMP/err" || fail "tools not read: $(cat "$TMP/err")"
grep -q "turns 2$" "$TMP/out" || fail "/tool did not make a turn: $(cat "$TMP/out")"

# Memory: what leaves a small ring is stored; a later chat recalls it automatically at its
# turn boundary (memory/auto_recall.h), and /memory says what was recalled and for what.
{ echo "Remember this: the access code of Vera Okafor is 48213."
  for i in $(seq 1 30); do echo "Question $i: what does the word harbour mean in the old texts of the town?"; done; } |
  "$CHANNEL" chat --temp 0 -n 8 -t 1 --slots 640 --memory "$TMP/r.mem" >/dev/null 2>"$TMP/err" || fail "memory 1: $(cat "$TMP/err")"
printf 'What is the access code of Vera Okafor?\n/memory\n' |
  "$CHANNEL" chat --temp 0 -n 8 -t 1 --slots 640 --memory "$TMP/r.mem" >"$TMP/out" 2>"$TMP/err" || fail "memory 2: $(cat "$TMP/err")"
grep -Eq '^last recall \(turn\): #[0-9]+ \(score [0-9.]+\) for "What is the access code of Vera Okafor\?"' "$TMP/out" ||
  fail "no automatic recall at the turn boundary: $(cat "$TMP/out")"
grep -q "Vera Okafor is 4" "$TMP/out" || fail "the fact's episode was not recalled: $(cat "$TMP/out")"
# The recall flags of run and stream reach chat (and serve) too: the whole top-k placed, with
# each hit's temporal neighbours.
printf 'What is the access code of Vera Okafor?\n/memory\n' |
  "$CHANNEL" chat --temp 0 -n 8 -t 1 --slots 640 --memory "$TMP/r.mem" --recall-k 3 \
    --recall-min-ratio 0 --recall-neighbours 1 --recall-lexical 32 >"$TMP/out" 2>"$TMP/err" ||
  fail "memory 3: $(cat "$TMP/err")"
grep -q "Vera Okafor is 4" "$TMP/out" || fail "recall flags: the fact's episode was not recalled: $(cat "$TMP/out")"
expect_error "chat: bad --recall-method" "recall-method" "$CHANNEL" chat --recall-method nearest
expect_error "chat: bad --recall-min-ratio" "recall-min-ratio" "$CHANNEL" chat --recall-min-ratio 2

# Memory: /memory lists the store.
printf 'What is a dog?\n/memory\n' | "${chat[@]}" --memory "$TMP/m.mem" >"$TMP/out" 2>"$TMP/err" ||
  fail "memory: $(cat "$TMP/err")"
grep -q "episodes in $TMP/m.mem" "$TMP/out" || fail "/memory: $(cat "$TMP/out")"

# Bad input: one line, non-zero exit, nothing loaded.
printf -- '---\ntools:\n  - description: no name\n---\nHi\n' >"$TMP/noname.md"
expect_error "tool without a name" "noname.md:3: a tool without a name" "$CHANNEL" chat --system "$TMP/noname.md"
printf -- '---\ntools: [\n---\n' >"$TMP/badyaml.md"
expect_error "bad YAML" "badyaml.md:[0-9]+: bad YAML" "$CHANNEL" chat --system "$TMP/badyaml.md"
printf -- '---\ntools:\n  - name: x\n    parameters: {type: object, properties: {a: 3}}\n---\n' >"$TMP/schema.md"
expect_error "not a JSON schema" "schema.md:4: parameters are not a JSON schema" "$CHANNEL" chat --system "$TMP/schema.md"
expect_error "unknown template" "unknown chat template 'jinja'" "$CHANNEL" chat --chat-template jinja
expect_error "missing system file" "cannot open" "$CHANNEL" chat --system "$TMP/none.md"
# `channel run` is on the ring too: --system is prefilled into the anchors; --ctx asks for
# the contiguous context, which takes no session, memory or system prompt.
"$CHANNEL" run --system "$sys" --temp 0 -n 8 --no-echo -t 1 \
  -p $'Question: What is the access code of Vera Okafor?\nAnswer:' >"$TMP/out" 2>"$TMP/err" || fail "run --system: $(cat "$TMP/err")"
grep -q "48213" "$TMP/out" || fail "run --system: the anchors were not read: $(cat "$TMP/out")"
grep -q "| clock" "$TMP/err" || fail "run is not on the ring: $(cat "$TMP/err")"
expect_error "run --ctx with --system" "contiguous" "$CHANNEL" run --ctx 64 --system "$sys" -p hi
printf '/nope\n/load\n' | "${chat[@]}" >"$TMP/out" 2>"$TMP/err" || fail "bad commands ended the chat"
grep -q "unknown command /nope" "$TMP/err" || fail "unknown command: $(cat "$TMP/err")"
grep -q "/load needs a FILE" "$TMP/err" || fail "/load: $(cat "$TMP/err")"
finish
