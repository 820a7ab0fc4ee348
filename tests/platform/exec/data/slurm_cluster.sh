#!/bin/bash
# Brings up (or tears down) a one-host Slurm cluster on loopback for the Slurm backend test:
#   slurm_cluster.sh start DIR   -> prints SLURM_CONF=DIR/slurm.conf; exit 3 = cannot start here
#   slurm_cluster.sh stop DIR
# Everything (munge key and socket, state, spool, logs, pid files) lives under DIR.
set -u
cmd=$1
dir=$2

stop() {
  for name in slurmd slurmctld munged; do
    pidfile="$dir/$name.pid"
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$pidfile"
  done
  # Step daemons of jobs that were still running.
  for p in $(pgrep -x slurmstepd); do
    if grep -qs "$dir" "/proc/$p/environ" "/proc/$p/cmdline"; then kill -KILL "$p"; fi
  done
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi

for tool in munged slurmctld slurmd sbatch squeue scancel sinfo scontrol; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install slurmctld slurmd slurm-client munge)"; exit 3; }
done
mkdir -p "$dir"/{state,spool,munge}
chmod 700 "$dir/munge"
host=$(hostname -s)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }
ctld_port=$(free_port)
slurmd_port=$(free_port)

dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed" \
  || { echo "munged failed to start: $(tail -3 "$dir/munged.log" 2>/dev/null)"; exit 3; }

node=$(slurmd -C 2>/dev/null | head -n1 | sed -E 's/ UpTime=.*//')
[ -n "$node" ] || node="NodeName=$host CPUs=$(nproc)"
# Keep the real layout but a modest memory claim, so the node never drains for memory.
node=$(echo "$node" | sed -E 's/RealMemory=[0-9]+/RealMemory=1024/')
cat > "$dir/slurm.conf" <<CONF
ClusterName=zenithtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
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
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF" -i >> "$dir/slurmctld.out" 2>&1 || { echo "slurmctld failed: $(tail -3 "$dir/slurmctld.log")"; stop; exit 3; }
slurmd -f "$SLURM_CONF" >> "$dir/slurmd.out" 2>&1 || { echo "slurmd failed: $(tail -3 "$dir/slurmd.log")"; stop; exit 3; }
for _ in $(seq 100); do
  state=$(sinfo -h -N -o %t 2>/dev/null | head -n1)
  case "$state" in idle|mix|alloc) echo "SLURM_CONF=$SLURM_CONF"; exit 0 ;; esac
  sleep 0.2
done
echo "the Slurm node did not become idle (state '$state'): $(tail -3 "$dir/slurmctld.log") $(tail -3 "$dir/slurmd.log")"
stop
exit 3
