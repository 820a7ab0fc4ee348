# Sourced by the tests/e2e/*.sh scripts. `e2e_work NAME` makes the scratch dir $work
# (/tmp/zenith_e2e_NAME.XXXXXX); on exit the script's server ($server_pid, when set) is stopped,
# every process a job under $work left is killed (nothing of the test may outlive it) and $work
# is removed.
server_pid=
e2e_cleanup() {
  [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  for p in $(grep -lsa "ZENITH_JOB_DIR=$work" /proc/[0-9]*/environ | cut -d/ -f3); do
    kill -KILL "$p" 2>/dev/null
  done
  rm -rf "$work"
}
e2e_work() {
  work=$(mktemp -d "/tmp/zenith_e2e_$1.XXXXXX")
  trap e2e_cleanup EXIT
}
