"""MindSpore 2.x's own tutorials (tests/python/mindspore_tutorials/, ported by changing only
`mindspore` to `zenith`) run to the end on zenith, each in its own process, in a folder laid
out as the tutorials expect (MNIST_Data/train, MNIST_Data/test from Fashion-MNIST).

The test reports every tutorial's result and asserts that at least EXPECTED_PASS of them run
to the end, naming those expected to pass: a regression in any of them fails.
"""

import os
import pathlib
import socket
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent / "mindspore_tutorials"
HARNESS = HERE / "_harness"

def _load_download():
    """The tutorials' harness module that lays out MNIST_Data/{train,test} from Fashion-MNIST
    (loaded by path: its folder also holds a stand-in matplotlib, kept off sys.path here)."""
    import importlib.util
    path = os.path.join(os.path.dirname(__file__), "mindspore_tutorials", "_harness",
                        "download.py")
    spec = importlib.util.spec_from_file_location("_ms_tutorial_download", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


download = _load_download()

# Tutorials that run to the end today; the test fails when one of them stops doing so.
EXPECTED = ["01_quick_start", "02_tensor", "03_dataset", "04_transforms", "05_model",
            "06_autograd", "07_train", "08_save_load", "09_static_graph", "10_mixed_precision",
            "11_custom_loss", "12_callback_model", "13_optimizer", "14_distributed_data_parallel",
            "15_readme"]
TIMEOUT_S = 240


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(script, workdir, python_env):
    """Runs script; the distributed sample runs as 2 ranks on 127.0.0.1, as its launcher
    (msrun --worker_num=2) would start it. Returns (all ranks exited 0, output tail)."""
    env = dict(python_env)
    env["PYTHONPATH"] = os.pathsep.join([str(HARNESS), env.get("PYTHONPATH", "")])
    env["DATA_PATH"] = str(workdir / "MNIST_Data" / "train")
    ranks = 2 if "distributed" in script.stem else 1
    port = str(_free_port())
    procs = []
    for rank in range(ranks):
        rank_env = dict(env, RANK_ID=str(rank), RANK_SIZE=str(ranks), MASTER_ADDR="127.0.0.1",
                        MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, str(script)], cwd=workdir, env=rank_env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outputs, ok = [], True
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            return False, f"timed out after {TIMEOUT_S} s"
        outputs.append(out)
        ok = ok and proc.returncode == 0
    tail = "".join(outputs).strip().splitlines()[-6:]
    return ok, "\n    ".join(tail)


@pytest.mark.slow
def test_mindspore_tutorials_run_to_the_end(tmp_path, python_env):
    scripts = sorted(HERE.glob("[0-9][0-9]_*.py"))
    assert len(scripts) == 15
    passed, report = [], []
    for script in scripts:
        workdir = tmp_path / script.stem
        workdir.mkdir()
        download.lay_out_mnist(str(workdir))
        ok, tail = _run(script, workdir, python_env)
        report.append(f"{'PASS' if ok else 'FAIL'} {script.stem}" + ("" if ok else f"\n    {tail}"))
        if ok:
            passed.append(script.stem)
    print("\n".join(report))
    print(f"{len(passed)} of {len(scripts)} MindSpore tutorials run to the end")
    missing = [name for name in EXPECTED if name not in passed]
    assert not missing, "tutorials that stopped running:\n" + "\n".join(report)
    assert len(passed) >= len(EXPECTED)
