"""zenith.Profiler: MindSpore's Profiler over zenith's C++ profiler (src/profiler). It times
every op the core dispatches (eager and graph replay), the phases Model.train marks (data wait,
forward, backward, optimizer) and the allocator's bytes in use, and writes the Chrome trace
`zenith train --profile` writes (Perfetto and chrome://tracing open it).

    profiler = zenith.Profiler(output_path="./profiler_data")   # recording starts
    model.train(1, dataset)
    profiler.analyse()         # ./profiler_data/trace.json, summary.json, summary.txt

    # a window of steps: skip 2, record 5 (as a Model.train callback, or call step() per step)
    profiler = zenith.Profiler(output_path="prof", start_step=2, profile_steps=5)
    model.train(1, dataset, callbacks=[profiler])
"""

import os

from zenith import _zenith as _C

__all__ = ["Profiler"]

# MindSpore's options that concern Ascend devices or its own analysis: accepted and ignored.
_IGNORED = {"profile_communication", "aicore_metrics", "l2_cache", "data_process",
            "parallel_strategy", "timeline_limit", "sync_enable", "with_stack",
            "data_simplification", "hbm_ddr", "pcie", "op_time", "profiler_level",
            "activities", "schedule", "on_trace_ready"}


class Profiler:
    """Profiler(output_path='./data', start_profile=True, profile_memory=True,
    record_shapes=True, start_step=None, profile_steps=None).

    Without a step window, recording starts at construction (or at start() with
    start_profile=False) and ends at stop() or analyse(). With start_step (steps to skip,
    default 0) or profile_steps (steps to record, default 10) it records that window of
    training steps: pass the profiler to Model.train's callbacks, or call step() after each
    step of a value_and_grad loop. analyse() writes output_path/trace.json (Chrome trace: "X"
    events for ops and phases, a "C" memory counter), summary.json and summary.txt.
    """

    def __init__(self, output_path="./data", start_profile=True, profile_memory=True,
                 record_shapes=True, start_step=None, profile_steps=None, **kwargs):
        unknown = sorted(set(kwargs) - _IGNORED)
        if unknown:
            raise ValueError(f"Profiler: unknown option(s) {unknown}")
        for name, value in (("start_step", start_step), ("profile_steps", profile_steps)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"Profiler: {name} must be an int, got {value!r}")
        self.output_path = os.path.abspath(str(output_path))
        self._memory = bool(profile_memory)
        self._shapes = bool(record_shapes)
        self._windowed = start_step is not None or profile_steps is not None
        self._skip = 0 if start_step is None else start_step
        self._steps = 10 if profile_steps is None else profile_steps
        if self._skip < 0 or self._steps < 1:
            raise ValueError(f"Profiler: start_step must be >= 0 and profile_steps >= 1, got "
                             f"{self._skip} and {self._steps}")
        self._prof = None
        self._written = False
        self._step = 0
        if self._windowed:
            if self._skip == 0:
                self.start()
        elif start_profile:
            self.start()

    def start(self):
        """Starts recording (one Profiler records at a time per process)."""
        if self._prof is not None and self._prof.running:
            return
        if _C.profiler.active():
            raise RuntimeError("Profiler: another Profiler is recording in this process")
        self._prof = _C.profiler.Profiler(self._shapes, self._memory)

    def stop(self):
        """Stops recording (idempotent)."""
        if self._prof is not None:
            self._prof.stop()

    def step(self):
        """Marks the end of a training step for the step window (start_step, profile_steps):
        recording starts after start_step steps and is written after profile_steps more."""
        self._step += 1
        if not self._windowed:
            return
        if self._prof is None and self._step == self._skip:
            self.start()
        elif self._prof is not None and self._prof.running and \
                self._step == self._skip + self._steps:
            self.analyse()

    def analyse(self, offline_path=None):
        """Stops recording and writes trace.json, summary.json and summary.txt into
        output_path (after a windowed Model.train, the callback has written them)."""
        if self._prof is None:
            if self._written or os.path.exists(os.path.join(self.output_path, "trace.json")):
                return
            raise RuntimeError("Profiler.analyse: nothing was recorded (the step window never "
                               "began: fewer steps than start_step?)")
        self._prof.stop()
        self._prof.write(self.output_path)
        self._written = True

    def summary(self, top_ops=15):
        """The summary table (phases, ops by self time) of the recording, as text."""
        if self._prof is None:
            path = os.path.join(self.output_path, "summary.txt")
            if os.path.exists(path):
                return open(path).read()
            raise RuntimeError("Profiler.summary: nothing was recorded")
        self._prof.stop()
        return self._prof.summary_table(top_ops)

    def _cpp(self):
        # As a Model.train callback: the C++ Profile callback records the step window.
        if not self._windowed:
            raise ValueError("Profiler: as a Model.train callback it needs a step window "
                             "(start_step=, profile_steps=); without one it records from its "
                             "construction until analyse()")
        if self._prof is not None:  # start_step 0 started it already: the callback takes over
            self._prof.stop()
            self._prof = None
        return _C.profiler.Profile(self.output_path, self._steps, self._skip)
