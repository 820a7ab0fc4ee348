#!/bin/bash
# A Slurm cluster of NODES nodes on this one host, for tests: its own munged (key, socket),
# slurmctld and one slurmd per node (Debian's Slurm is built with MULTIPLE_SLURMD), all on
# loopback, every file under DIR:
#   slurm_cluster.sh start DIR [NODES]  -> nodes n1..nNODES (default 2), 2 CPUs each, partition
#                                          "debug"; prints SLURM_CONF=DIR/slurm.conf;
#                                          exit 3 = Slurm cannot start here (the reason on stdout)
#   slurm_cluster.sh stop DIR           -> cancels the cluster's jobs, stops its daemons and
#                                          kills whatever of its jobs is left
set -u
cmd=$1
dir=$2
nodes=${3:-2}
conf=$dir/slurm.conf

# Processes whose environment names this cluster's slurm.conf and that belong to it: step
# daemons (slurmd's children) and the jobs' tasks (SLURM_JOB_ID). Not the caller, which may
# have SLURM_CONF set too.
cluster_processes() {
  local p
  for p in $(grep -lsaF "SLURM_CONF=$conf" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    [ "$p" = $$ ] && continue
    if [ "$(cat /proc/"$p"/comm 2>/dev/null)" = slurmstepd ] ||
      { tr '\0' '\n' < /proc/"$p"/environ | grep -q '^SLURM_JOB_ID='; } 2>/dev/null; then
      echo "$p"
    fi
  done
}

stop_daemons() {  # SIGTERM to the daemons of these pid files at once, SIGKILL after 5 s
  local pids=() pidfile pid
  for pidfile in "$@"; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    rm -f "$pidfile"
  done
  for _ in $(seq 50); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null
}

stop() {
  export SLURM_CONF=$conf
  if [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
    # Jobs first, while the daemons can still end them cleanly on every node.
    ids=$(squeue -h -o %i 2>/dev/null)
    if [ -n "$ids" ]; then
      scancel $ids 2>/dev/null
      for _ in $(seq 50); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2; done
    fi
  fi
  stop_daemons "$dir"/slurmd-*.pid
  stop_daemons "$dir/slurmctld.pid" "$dir/munged.pid"
  for p in $(cluster_processes); do kill -KILL "$p" 2>/dev/null; done
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi

for tool in munged slurmctld slurmd sbatch srun squeue scancel sinfo scontrol; do
  command -v "$tool" >/dev/null ||
    { echo "missing $tool (apt-get install slurmctld slurmd slurm-client munge)"; exit 3; }
done
mkdir -p "$dir"/{state,spool,munge}
chmod 700 "$dir/munge"
user=$(id -un)
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' \
    2>/dev/null || echo $((20000 + RANDOM % 20000))
}
ctld_port=$(free_port)
# Each task bound to its own core (task/affinity), as sites bind them: unbound, 2 x 2 ranks of
# one thread sharing this host's cores took 72 ms a DDP step instead of 21 ms. Only where this
# process may run on CPUs 0 and 1, which each node's CPUs=2 stand for; unbound elsewhere.
task_plugin=task/none
taskset -c 0 true 2>/dev/null && taskset -c 1 true 2>/dev/null && task_plugin=task/affinity

dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed" ||
  { echo "munged failed to start: $(tail -3 "$dir/munged.log" 2>/dev/null)"; exit 3; }

# Job ids (hence MASTER_PORTs, derived from them) start at random, so that clusters of tests
# running side by side on this host do not hand out the same ones.
cat > "$conf" <<CONF
ClusterName=zenithtest
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmUser=$user
SlurmdUser=$user
SlurmctldPort=$ctld_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/pgid
TaskPlugin=$task_plugin
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=600
KillWait=5
FirstJobId=$((1000 + RANDOM % 30000 * 3))
CONF
for n in $(seq "$nodes"); do
  echo "NodeName=n$n NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 Port=$(free_port) CPUs=2 RealMemory=1024 State=UNKNOWN" >> "$conf"
done
echo "PartitionName=debug Nodes=n[1-$nodes] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES" >> "$conf"

export SLURM_CONF=$conf
slurmctld -f "$conf" -i >> "$dir/slurmctld.out" 2>&1 ||
  { echo "slurmctld failed: $(tail -3 "$dir/slurmctld.log")"; stop; exit 3; }
for n in $(seq "$nodes"); do
  mkdir -p "$dir/spool/n$n"
  slurmd -f "$conf" -N "n$n" >> "$dir/slurmd-n$n.out" 2>&1 ||
    { echo "slurmd n$n failed: $(tail -3 "$dir/slurmd-n$n.log")"; stop; exit 3; }
done
# Up to 90 s: on a loaded machine the daemons can take a while to register their nodes, and a
# slow start is no reason to skip the tests.
start=$SECONDS
while [ $((SECONDS - start)) -lt 90 ]; do
  states=$(sinfo -h -N -o %t 2>/dev/null | sort -u | tr '\n' ' ')
  [ "$states" = "idle " ] && { echo "SLURM_CONF=$conf"; exit 0; }
  sleep 0.2
done
echo "the Slurm nodes did not become idle in 90 s (states: $states): $(tail -3 "$dir/slurmctld.log")"
stop
exit 3
