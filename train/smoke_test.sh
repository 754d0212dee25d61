#!/usr/bin/env bash
# CI smoke test of the training pipeline on the CPU (Debian python3-torch).
# Skips, loudly, when python3-torch / numpy / sentencepiece are missing
# (install the packages listed in train/apt-packages.txt).
set -uo pipefail
cd "$(dirname "$0")"
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
exec "$py" smoke_test.py "$@"
