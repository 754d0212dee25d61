#!/usr/bin/env bash
# `channel chat` in a real terminal (tmux): type a question and read the answer off the
# screen, interrupt a long reply with Ctrl-C and keep chatting, drop a half-typed line with
# Ctrl-C, multi-line input, and leave with Ctrl-D.
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command chat
command -v tmux >/dev/null || skip_test "tmux is not installed (scripts/setup.sh installs it)"
sock="$TMP/tmux.sock"
tm() { tmux -S "$sock" "$@"; }
trap 'tm kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
screen() { tm capture-pane -p -t chat -S -200; }
# wait_for REGEX [SECONDS]: until the screen shows REGEX.
wait_for() {
  local i
  for ((i = 0; i < ${2:-60} * 10; i++)); do
    screen | grep -Eq -- "$1" && return 0
    sleep 0.1
  done
  fail "the screen never showed '$1'; it shows:"$'\n'"$(screen | tail -15)"
  return 1
}
# wait_count REGEX N: until N lines of the screen match REGEX.
wait_count() {
  local i
  for ((i = 0; i < 600; i++)); do
    (($(screen | grep -Ec -- "$1") >= $2)) && return 0
    sleep 0.1
  done
  fail "the screen never showed $2 lines of '$1'; it shows:"$'\n'"$(screen | tail -15)"
}
printf 'Remember this: the access code of Vera Okafor is 48213.\n' >"$TMP/sys.md"

start() {
  tm new-session -d -s chat -x 160 -y 50 "$* ; echo CHAT-EXITED \$?; sleep 60"
}

# A question typed at the prompt; the answer appears; a multi-line message; Ctrl-D leaves.
start "$CHANNEL" chat --temp 0 -t 1 -n 24 --system "$TMP/sys.md"
wait_for '^>$' || finish
tm send-keys -t chat 'What is the access code of Vera Okafor?' Enter
wait_for '^48213\.+$'
tm send-keys -t chat 'What is the access code \' Enter
wait_for '^\.\.\.$'
tm send-keys -t chat 'of Vera Okafor?' Enter
wait_count '^48213\.+$' 2
tm send-keys -t chat 'half a line' C-c
wait_for 'Ctrl-C: input dropped'
tm send-keys -t chat '/stats' Enter
wait_for 'turns 2$'
tm send-keys -t chat C-d
wait_for 'CHAT-EXITED 0'
tm kill-server
sock="$TMP/tmux2.sock"

# Ctrl-C interrupts a long reply (a template without Channel's one-line stop) and the chat goes on.
start "$CHANNEL" chat --temp 0.8 -t 1 -n 100000 --chat-template chatml
wait_for '^>$' || finish
tm send-keys -t chat 'Tell me everything about the history of the harbour.' Enter
# Interrupt as soon as the reply streams: a fixed sleep can outlast a fast reply.
for ((i = 0; i < 1200; i++)); do
  last=$(screen | grep -v '^[[:space:]]*$' | tail -1)
  [[ $last != *"history of the harbour."* && $last != ">" ]] && break
  sleep 0.05
done
tm send-keys -t chat C-c
wait_for '\[interrupted\]'
tm send-keys -t chat '/stats' Enter
wait_for 'turns 1$'
tm send-keys -t chat '/quit' Enter
wait_for 'CHAT-EXITED 0'
finish
