"""Python on the job platform: a job YAML with `npu: 2` and `entry: python train.py`
(examples/python/train.py: communication.init(), set_auto_parallel_context(data_parallel),
Model.train) runs 2 data-parallel ranks under `zenith run`, and under `zenith server` its loss
reaches the dashboard's store from both ranks through ZENITH_METRICS_FILE."""

import json
import os
import re
import signal
import subprocess
import time
import urllib.request

import pytest

from conftest import example


def job_yaml(path, name):
    path.write_text(f"""job:
  name: {name}
  framework: zenith
  resources: {{ npu: 2 }}
  working_dir: {os.path.dirname(example("train.py"))}
  env: {{ ZENITH_NUM_THREADS: "1", ZENITH_COMM_TIMEOUT: "60" }}
  entry: python train.py --epochs 1 --limit 1280 --batch-size 32
""")
    return str(path)


def test_zenith_run_python_entry(zenith_binary, python_env, tmp_path, fashion_mnist):
    yaml = job_yaml(tmp_path / "job.yaml", "python-ddp-run")
    result = subprocess.run([zenith_binary, "run", yaml, "--data", str(tmp_path / "data")],
                            env=python_env, capture_output=True, text=True, timeout=600)
    out = result.stdout
    assert result.returncode == 0, result.stderr[-3000:] + out[-3000:]
    for rank in (0, 1):  # lines "[rank R] <time> <the rank's output>"
        assert re.search(rf"^\[rank {rank}\] .*rank {rank} of 2: DistributedDataParallel, 20 steps "
                         "per epoch", out, re.M), out[-3000:]
        assert re.search(rf"^\[rank {rank}\] .*rank {rank}: {{'Accuracy': ", out, re.M)
    accuracies = {line.split("'Accuracy': ")[1].rstrip("}") for line in out.splitlines()
                  if "'Accuracy': " in line}
    assert len(accuracies) == 1  # both ranks report the job's accuracy
    assert float(accuracies.pop()) > 0.5


def test_zenith_submit_python_entry_feeds_the_dashboard(zenith_binary, python_env, tmp_path,
                                                        fashion_mnist):
    data = tmp_path / "srv"
    server = subprocess.Popen([zenith_binary, "server", "--host", "127.0.0.1", "--port", "0",
                               "--data", str(data), "--cpu-devices", "2", "--grace", "1s"],
                              env=python_env, stdout=subprocess.DEVNULL,
                              stderr=open(tmp_path / "server.log", "w"))
    try:
        for _ in range(200):
            if (data / "server.url").exists() and (data / "server.url").read_text().strip():
                break
            time.sleep(0.1)
        url = (data / "server.url").read_text().strip()
        token = (data / "token").read_text().strip()
        env = dict(python_env, ZENITH_SERVER=url, ZENITH_DATA=str(data))
        submit = subprocess.run([zenith_binary, "submit", job_yaml(tmp_path / "job.yaml",
                                                                   "python-ddp-submit")],
                                env=env, capture_output=True, text=True, timeout=60)
        assert submit.returncode == 0, submit.stderr
        job_id = submit.stdout.split("submitted job ")[1].split()[0]
        state = ""
        for _ in range(600):
            state = subprocess.run([zenith_binary, "job", job_id], env=env, capture_output=True,
                                   text=True, timeout=30).stdout
            if "succeeded" in state or "failed" in state:
                break
            time.sleep(1)
        logs = subprocess.run([zenith_binary, "logs", job_id, "--rank", "1"], env=env,
                              capture_output=True, text=True, timeout=30).stdout
        assert "succeeded" in state, state + logs[-3000:]
        assert "rank 1 of 2: DistributedDataParallel" in logs
        assert "rank_1.metrics.jsonl" in logs

        def series():
            request = urllib.request.Request(f"{url}/api/v1/dashboard/jobs/{job_id}/series",
                                             headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=10) as reply:
                return json.load(reply)["series"]

        losses = {}
        for _ in range(50):  # the server ingests the files every second
            losses = {s["rank"]: s for s in series() if s["name"] == "loss"}
            if len(losses) == 2 and all(s["total"] >= 2 for s in losses.values()):
                break
            time.sleep(0.2)
        assert sorted(losses) == [0, 1], series()
        assert losses[0]["step"][:2] == [10, 20]
        assert all(v is not None and 0 < v < 5 for s in losses.values() for v in s["value"])
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
