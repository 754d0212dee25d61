#!/usr/bin/env bash
# `channel serve` with real clients: the official openai npm client (tests/js/openai.test.mjs,
# responses.test.mjs), Anthropic-style requests over fetch (anthropic.test.mjs)
# and the web view in headless Chromium through playwright-core (tests/js/webview.test.mjs).
# scripts/setup.sh installs node, npm, chromium and the packages (npm ci in tests/js).
source "$(dirname "$0")/lib/cli_assert.bash" "$@"
require_command serve
js="$(cd "$(dirname "$0")/../js" && pwd)"
command -v node >/dev/null || skip_test "node is not installed (scripts/setup.sh installs it)"
[[ -d "$js/node_modules/openai" ]] || skip_test "tests/js has no node_modules (run scripts/setup.sh: npm ci in tests/js)"
files=(openai.test.mjs responses.test.mjs anthropic.test.mjs)
if [[ -x /usr/bin/chromium && -d "$js/node_modules/playwright-core" ]]; then
  files+=(webview.test.mjs)
else
  echo "*** webview test skipped: /usr/bin/chromium or playwright-core missing ***" >&2
fi
export CHANNEL WEBVIEW_SCREENSHOT="${WEBVIEW_SCREENSHOT:-$TMP/webview.png}"
(cd "$js" && node --test --test-concurrency=1 "${files[@]}") >"$TMP/out" 2>&1 || fail "node tests: $(grep -E '^not ok|error:|Error' "$TMP/out" | head -20)"
grep -E '^# (pass|fail)' "$TMP/out" >&2
finish
