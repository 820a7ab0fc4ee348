"""Start a script as the ranks of one job on this host (MindSpore's and torchrun's environment
variables, a free loopback port) and read what each printed on its `RESULT {json}` line."""

import json
import socket
import subprocess
import sys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def result(stdout):
    """The JSON of the last `RESULT ` line of a script's output."""
    line = [l for l in stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def run_ranks(env, script, args=(), size=2, timeout=300, raw=False):
    """Runs `python script args...` as ranks 0..size-1 (ZENITH_NUM_THREADS=1 unless env sets
    it, a 60 s communication timeout); asserts each exits 0 and returns their results (raw: their
    whole output) in rank order."""
    port = free_port()
    procs = []
    for rank in range(size):
        rank_env = dict({"ZENITH_NUM_THREADS": "1"}, **env)
        rank_env.update(RANK_ID=str(rank), RANK_SIZE=str(size), RANK=str(rank),
                        WORLD_SIZE=str(size), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                        MASTER_PORT=str(port), ZENITH_COMM_TIMEOUT="60")
        procs.append(subprocess.Popen([sys.executable, str(script), *map(str, args)],
                                      env=rank_env, text=True, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE))
    results = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        assert p.returncode == 0, stderr + stdout
        results.append(stdout if raw else result(stdout))
    return results
