#!/bin/sh
# npm ci into DIR (holding package.json and package-lock.json), unless DIR/node_modules already
# matches the lock file. Offline, a node_modules that is already there is used as it is.
#   npm_install.sh NPM DIR
set -u
npm=$1
cd "$2" || exit 1
stamp=node_modules/.zenith-package-lock.json
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then exit 0; fi
if "$npm" ci --prefer-offline --no-audit --no-fund --loglevel=error; then
  cp package-lock.json "$stamp"
  exit 0
fi
if [ -f node_modules/uplot/dist/uPlot.iife.min.js ]; then
  echo "npm ci failed (offline?): using the node_modules already in $2" >&2
  exit 0
fi
echo "npm ci failed and $2/node_modules is missing: the dashboard cannot be built" >&2
exit 1
