#!/usr/bin/env python3
"""docs/performance.md is what scripts/perf_report.py renders from the committed
docs/perf/*.json: a figure edited by hand, or JSON committed without its page, fails. Also
checks that every table carries the host's ISA and sgemm peak, and (on a copy of the JSON with
one figure changed) that the check can fail."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "perf_report.py")
PERF = os.path.join(ROOT, "docs", "perf")
PAGE = os.path.join(ROOT, "docs", "performance.md")


def check(perf_dir, page):
    return subprocess.run([sys.executable, SCRIPT, "--check", "--perf-dir", perf_dir,
                           "--page", page], capture_output=True, text=True)


def main():
    got = check(PERF, PAGE)
    if got.returncode != 0:
        sys.exit(got.stdout + got.stderr)
    with open(PAGE) as f:
        text = f.read()
    with open(os.path.join(PERF, "runs.json")) as f:
        runs = json.load(f)["runs"]
    tables = text.count("\n## ")
    if tables != len(runs) or text.count("Host ISA: ") != len(runs) or \
            text.count("sgemm peak (dnnl_sgemm 2048^3): ") != len(runs):
        sys.exit(f"{PAGE}: expected {len(runs)} tables, each with the host's ISA and sgemm peak")
    with tempfile.TemporaryDirectory() as tmp:  # one figure changed: the check must fail
        perf = os.path.join(tmp, "perf")
        shutil.copytree(PERF, perf)
        path = os.path.join(perf, runs[0]["file"])
        with open(path) as f:
            result = json.load(f)
        result["sgemm_peak_gflops"] += 1.0
        with open(path, "w") as f:
            json.dump(result, f)
        if check(perf, PAGE).returncode == 0:
            sys.exit("perf_report --check passed with a changed figure")
    print(f"{PAGE} matches docs/perf/*.json ({len(runs)} tables)")


if __name__ == "__main__":
    main()
