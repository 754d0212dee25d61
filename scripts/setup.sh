#!/usr/bin/env bash
# Installs everything Channel needs on a fresh Debian 12 (bookworm), with apt-get only.
# Usage: sudo scripts/setup.sh   (as root it runs apt-get directly)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libcli11-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev            # libFuzzer targets and sanitizers
  python3 python3-numpy python3-jinja2   # python3-jinja2: chat template goldens
  libyaml-cpp-dev                     # system prompt front matter (tools)
  libcpp-httplib-dev                  # channel serve
  tmux                                # the interactive chat test
  chromium                            # the web view test (headless, through playwright-core)
)
# node and npm for the openai client tests: Debian's, unless a node with npm is installed.
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
# The training smoke test's needs are listed by train/ itself.
if [[ -f train/apt-packages.txt ]]; then
  while read -r p; do [[ -n "$p" && "$p" != \#* ]] && packages+=("$p"); done < train/apt-packages.txt
fi

sudo_cmd=()
[[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The JavaScript test clients (openai, playwright-core) at the versions of the lock file.
if [[ -f tests/js/package-lock.json ]] && ! (cd tests/js && npm ls --silent >/dev/null 2>&1); then
  echo "setup: npm ci in tests/js" >&2
  (cd tests/js && npm ci --no-audit --no-fund --silent)
fi
echo "setup: dependencies present" >&2
