#!/bin/sh
# npm ci into tests/npm (the independent readers tests check zenith against: node-llama-cpp, which
# ships prebuilt llama.cpp CPU libraries; the openai SDK; @huggingface/gguf), unless
# tests/npm/node_modules already matches package-lock.json. Install scripts are not run: the
# prebuilt llama.cpp libraries come as npm packages (@node-llama-cpp/linux-x64), and
# node-llama-cpp's postinstall would try to download or build llama.cpp. Offline, a node_modules
# that is already there is used as it is. Run by the CTest fixture npm.install (tests that need
# these packages require the fixture npm_anchors).
#   install.sh [NPM]
set -u
npm=${1:-npm}
cd "$(dirname "$0")" || exit 1
stamp=node_modules/.zenith-package-lock.json
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then exit 0; fi
if "$npm" ci --prefer-offline --ignore-scripts --no-audit --no-fund --loglevel=error; then
  cp package-lock.json "$stamp"
  exit 0
fi
if [ -f node_modules/node-llama-cpp/package.json ] && [ -f node_modules/openai/package.json ]; then
  echo "npm ci failed (offline?): using the node_modules already in tests/npm" >&2
  exit 0
fi
echo "npm ci failed and tests/npm/node_modules is missing: install nodejs and npm, and give" \
  "npm the registry (or a warm cache) once" >&2
exit 1
