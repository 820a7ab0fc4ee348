#!/bin/bash
# `zenith train --profile` on real Fashion-MNIST, its trace validated against
# profile_trace.schema.json by Debian's python3-jsonschema (a validator that is not zenith's),
# once for one process and once for 2 ranks (--nproc 2: rank 0 merges both ranks' traces), plus
# what a viewer needs beyond the schema: each rank a process, every step's phases inside it, and
# the summary table printed at the end of the run. $1 is the zenith binary.
set -u
ZENITH=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../support/e2e_work.bash"
e2e_work profile
fail() {
  echo "FAIL: $*"
  exit 1
}
/usr/bin/python3 -c "import jsonschema" || fail "needs Debian's python3-jsonschema"
[ -d /usr/share/datasets/fashion-mnist ] || fail "Fashion-MNIST missing (apt-get install dataset-fashion-mnist)"
export ZENITH_DATA="$work/platform"  # --nproc runs the ranks as a local job

train() {  # OUT [flags...]
  local out=$1
  shift
  "$ZENITH" train --model seedcnn --dataset fashion-mnist --epochs 1 --limit-train 1024 \
    --limit-test 64 --batch-size 32 --progress plain --out "$work/$out" --profile 5 "$@" \
    > "$work/$out.log" 2>&1 || fail "train $out: $(tail -5 "$work/$out.log")"
}
train single
grep -q "op (by self time)" "$work/single.log" || fail "no summary table printed: $(tail -20 "$work/single.log")"
train ranks --nproc 2 --threads 1

/usr/bin/python3 - "$here/profile_trace.schema.json" "$work/single/profile" "$work/ranks/profile" <<'PY' || fail "trace check"
import importlib.metadata
import json
import sys

import jsonschema

schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
for profile, ranks in ((sys.argv[2], 1), (sys.argv[3], 2)):
    trace = json.load(open(f"{profile}/trace.json"))
    errors = list(validator.iter_errors(trace))
    for e in errors[:10]:
        print(f"{profile}: {list(e.absolute_path)}: {e.message}")
    assert not errors, f"{len(errors)} schema violations"
    events = trace["traceEvents"]
    pids = {e["pid"] for e in events}
    assert pids == set(range(ranks)), pids
    steps = [e for e in events if e["ph"] == "X" and e["cat"] == "step"]
    assert len(steps) == 5 * ranks, len(steps)
    for s in steps:  # every phase of a step lies inside it, on its thread
        inside = [e for e in events if e["ph"] == "X" and e["cat"] == "phase"
                  and e["pid"] == s["pid"] and e["tid"] == s["tid"]
                  and s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1e-3]
        names = {e["name"] for e in inside}
        assert {"data wait", "forward", "backward", "optimizer"} <= names, names
        if ranks > 1:
            assert "communication wait" in names, names
    summary = json.load(open(f"{profile}/summary.json"))
    assert summary["steps"] == 5 and len(summary.get("ranks", [summary])) == ranks, summary
    ops = [o["name"] for o in summary["ops"]]
    print(f"{profile}/trace.json: {len(events)} events valid against the schema "
          f"(jsonschema {importlib.metadata.version('jsonschema')}), "
          f"{ranks} rank(s), {len(steps)} steps, {summary['ms_per_step']:.2f} ms per step, "
          f"top ops {ops[:3]}")
PY
echo "profile_trace: all checks passed"
