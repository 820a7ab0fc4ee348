#!/bin/bash
# `zenith server`'s start banner and the dashboard: with ZENITH_WEB_DIR at an empty dir the
# banner says the dashboard is not built, where it looked and how to build it (and / says so);
# with the built web files it prints the dashboard's address, carrying the admin token
# (`?token=`) only when stdout is a terminal: never into a redirected stdout (a log file).
# $1 is the zenith binary.
set -u
ZENITH=$(realpath "$1")
build=$(dirname "$ZENITH")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../support/e2e_work.bash"
e2e_work dashboard_banner
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.out; do [ -f "$f" ] && echo "--- $f" && cat "$f"; done
  exit 1
}
web="$build/share/zenith/web"
[ -f "$web/index.html" ] || fail "no dashboard files in $web (build the zenith_web target)"

# Starts a server on DATA ($1) with ZENITH_WEB_DIR=$2, stdout into $work/$3.out; waits for its
# banner's dashboard line.
start() {
  ZENITH_WEB_DIR=$2 "$ZENITH" server --host 127.0.0.1 --port 0 --data "$work/$1" > "$work/$3.out" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do grep -q "dashboard:" "$work/$3.out" && return 0; sleep 0.1; done
  fail "no dashboard line in the banner of $3"
}
stop() {
  kill -TERM "$server_pid" && wait "$server_pid"
  server_pid=
}

# --- an empty web dir.
mkdir "$work/empty"
start srv1 "$work/empty" empty
line=$(grep "dashboard:" "$work/empty.out")
echo "$line"
grep -q "dashboard: not built: no index.html in ZENITH_WEB_DIR ($work/empty)" <<< "$line" ||
  fail "the banner does not say the dashboard is missing from ZENITH_WEB_DIR: $line"
grep -q "scripts/build.sh release --target zenith_web" <<< "$line" || fail "no build hint: $line"
page=$(curl -fsS "$(cat "$work/srv1/server.url")/") || fail "GET /"
grep -q "The dashboard is not built: no index.html in ZENITH_WEB_DIR" <<< "$page" &&
  grep -q "zenith_web" <<< "$page" || fail "GET / without the dashboard: $page"
stop
echo "ok: with an empty ZENITH_WEB_DIR the banner and / say the dashboard is not built, and how to build it"

# --- the built web dir, stdout into a file: the address, no token.
start srv2 "$web" file
url=$(cat "$work/srv2/server.url")
token=$(cat "$work/srv2/token")
line=$(grep "dashboard:" "$work/file.out")
echo "$line"
grep -qF "dashboard: $url/ (log in with the token" <<< "$line" || fail "dashboard line: $line"
! grep -qF "$token" "$work/file.out" || fail "the admin token was written into the redirected stdout"
stop
echo "ok: into a file the banner prints the dashboard's address without the token"

# --- the same on a terminal (script(1) gives it one): the address with ?token=.
script -qfec "sh -c 'echo \$\$ > $work/tty.pid; ZENITH_WEB_DIR=$web exec $ZENITH server --host 127.0.0.1 --port 0 --data $work/srv2'" \
  /dev/null > "$work/tty.out" 2>&1 < /dev/null &
script_pid=$!
for _ in $(seq 100); do grep -q "dashboard:" "$work/tty.out" && break; sleep 0.1; done
server_pid=$(cat "$work/tty.pid")
line=$(grep "dashboard:" "$work/tty.out" | tr -d '\r')
url=$(cat "$work/srv2/server.url")
kill -TERM "$server_pid" && wait "$script_pid"  # the server is script's child, not this shell's
server_pid=
echo "${line%%\?token=*}?token=<the admin token>"
[ "$line" = "  dashboard: $url/?token=$token" ] || fail "on a terminal: '$line', expected the address with ?token="
echo "ok: on a terminal the banner prints the dashboard's address with ?token= (the admin token)"
echo "dashboard_banner: all checks passed"
