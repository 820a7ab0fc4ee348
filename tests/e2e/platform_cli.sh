#!/bin/bash
# The job commands as a user types them: `zenith run`, then a server with submit/jobs/job/logs/
# cancel/smi, including bad input. $1 is the zenith binary.
set -u
ZENITH=$(realpath "$1")
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_work.bash"
e2e_work platform
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"

# --- zenith run: the seed's YAML in the foreground, 8 ranks, exit code = the job's.
cat > job.yaml <<'YAML'
job:
  name: cifar10-training
  framework: mindspore
  resources: { npu: 8, memory: 64Gi, storage: 100Gi }
  entry: sh print_rank.sh
YAML
cat > print_rank.sh <<'SH'
echo "RANK_ID=$RANK_ID DEVICE_ID=$DEVICE_ID RANK_SIZE=$RANK_SIZE MASTER_PORT=$MASTER_PORT"
SH
"$ZENITH" run job.yaml --data "$work/data" > run.out 2> run.err || fail "zenith run exited $?: $(cat run.err)"
for r in 0 1 2 3 4 5 6 7; do
  grep -q "^\[rank $r\] .*\[INFO\] Rank $r started (pid [0-9]*, device cpu:$r)" run.out || fail "no start line for rank $r"
  grep -q "^\[rank $r\] .*RANK_ID=$r DEVICE_ID=$r RANK_SIZE=8" run.out || fail "rank $r env"
done
echo "ok: zenith run, 8 ranks"

printf 'job:\n  resources: { npu: 2 }\n  entry: exit 7\n' > fail.yaml
"$ZENITH" run fail.yaml --data "$work/data" > /dev/null 2> fail.err
[ $? = 7 ] || fail "zenith run should exit with the job's code 7"
grep -q "\[alert\] abnormal_exit" fail.err || fail "no abnormal_exit alert: $(cat fail.err)"
echo "ok: zenith run failure exit code and alert"

printf 'job:\n  resorces: { npu: 8 }\n  resources: { memory: 64Gx }\n' > bad.yaml
"$ZENITH" run bad.yaml > /dev/null 2> bad.err && fail "bad spec accepted"
grep -q "bad.yaml:2:3: unknown key 'resorces' in job (did you mean 'resources'?)" bad.err || fail "typo error: $(cat bad.err)"
grep -q "bad.yaml:3:24: bad quantity '64Gx'" bad.err || fail "quantity error: $(cat bad.err)"
grep -q "missing 'job.entry'" bad.err || fail "entry error: $(cat bad.err)"
echo "ok: spec errors with file:line:column"

printf 'job:\n  resources: { npu: 64 }\n  entry: "true"\n' > big.yaml
"$ZENITH" run big.yaml > /dev/null 2> big.err && fail "npu: 64 accepted"
grep -q "64 cpu devices but this host has 8" big.err || fail "$(cat big.err)"
echo "ok: npu: 64 rejected"

# --- the server and the client commands.
"$ZENITH" server --port 0 --data "$work/srv" > server.log 2>&1 &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/srv/server.url" ] && break; sleep 0.1; done
[ -s "$work/srv/server.url" ] || fail "server did not start: $(cat server.log)"
export ZENITH_SERVER=$(cat "$work/srv/server.url") ZENITH_DATA="$work/srv"
[ "$(stat -c %a "$work/srv/token")" = 600 ] || fail "token mode"

# The seed asks for 64Gi: a host with less refuses it at submit, with the numbers.
printf 'job:\n  resources: { npu: 1, memory: 64Ti }\n  entry: x\n' > huge.yaml
"$ZENITH" submit huge.yaml > /dev/null 2> huge.err && fail "memory: 64Ti accepted by the server"
grep -q "rejected: the job asks for memory 64Ti but this host has" huge.err || fail "$(cat huge.err)"
sed -i 's/memory: 64Gi, storage: 100Gi/memory: 1Gi, storage: 1Gi/' job.yaml
"$ZENITH" submit job.yaml --follow > submit.out 2>&1 || fail "submit --follow: $(cat submit.out)"
grep -q "submitted job 1 (cifar10-training)" submit.out || fail "$(cat submit.out)"
grep -q "^\[rank 7\] .*RANK_ID=7" submit.out || fail "follow output: $(cat submit.out)"
grep -q "job 1 succeeded" submit.out || fail "$(cat submit.out)"
"$ZENITH" logs 1 --rank 3 | grep -q "RANK_ID=3 DEVICE_ID=3" || fail "logs --rank 3"
echo "ok: submit --follow, logs --rank"

printf 'job:\n  name: sleeper\n  resources: { npu: 2 }\n  entry: sleep 300\n' > long.yaml
"$ZENITH" submit long.yaml | grep -q "submitted job 2" || fail "submit long"
for _ in $(seq 100); do "$ZENITH" jobs --state running | grep -q sleeper && break; sleep 0.1; done
"$ZENITH" smi > smi.out
grep -Eq "^\| 0 +\| cpu +\| [0-9,]+ +\| 2 +\| 0 " smi.out || fail "smi: $(cat smi.out)"
"$ZENITH" cancel 2 | grep -q "job 2: cancelled" || fail "cancel"
sleep 0.3
grep -lsa "ZENITH_JOB_DIR=$work/srv/jobs/2" /proc/[0-9]*/environ && fail "processes left after cancel"
echo "ok: smi, cancel"

"$ZENITH" submit fail.yaml > /dev/null
for _ in $(seq 100); do "$ZENITH" jobs --state failed | grep -q abnormal_exit && break; sleep 0.1; done
"$ZENITH" jobs > jobs.out
grep -Eq "^3 .* failed .*\[abnormal_exit\]" jobs.out || fail "jobs: $(cat jobs.out)"
"$ZENITH" job 3 > job3.out
grep -q "\[abnormal_exit\]" job3.out && grep -q "exit code:   7" job3.out || fail "job 3: $(cat job3.out)"
echo "ok: jobs and job show alerts"

"$ZENITH" submit bad.yaml > /dev/null 2> submit_bad.err && fail "bad spec accepted by the server"
grep -q "bad.yaml:2:3: unknown key 'resorces'" submit_bad.err || fail "$(cat submit_bad.err)"
"$ZENITH" submit big.yaml > /dev/null 2> submit_big.err && fail "npu: 64 accepted by the server"
grep -q "rejected: the job asks for 64 cpu devices" submit_big.err || fail "$(cat submit_big.err)"
ZENITH_TOKEN=wrong "$ZENITH" cancel 1 2> token.err && fail "wrong token accepted"
grep -q "invalid bearer token" token.err || fail "$(cat token.err)"
"$ZENITH" job 99 2> nojob.err && fail "job 99 found"
grep -q "no job with id '99'" nojob.err || fail "$(cat nojob.err)"
"$ZENITH" jobs > /dev/null || fail "server stopped serving"
echo "ok: errors from the server, and it keeps serving"
echo "platform_cli: all 8 checks passed"
