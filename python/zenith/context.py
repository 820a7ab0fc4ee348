"""Process-wide settings with MindSpore's names: set_context, set_seed and the auto-parallel
context (data parallelism: Model wraps its network in DistributedDataParallel)."""

from zenith import _zenith as _C

__all__ = [
    "PYNATIVE_MODE", "GRAPH_MODE", "set_context", "get_context", "set_seed", "get_seed",
    "ParallelMode", "set_auto_parallel_context", "get_auto_parallel_context",
    "reset_auto_parallel_context",
]

PYNATIVE_MODE = _C.context.PYNATIVE_MODE
GRAPH_MODE = _C.context.GRAPH_MODE

# Keys set_context takes; those marked None are accepted for MindSpore programs and have no
# effect on the CPU.
_CONTEXT = {"mode": PYNATIVE_MODE, "device_target": "CPU", "device_id": 0,
            "runtime_num_threads": None, "deterministic": "OFF", "save_graphs": False,
            "save_graphs_path": ".", "max_call_depth": 1000, "pynative_synchronize": False,
            "max_device_memory": None, "jit_config": None, "jit_syntax_level": None,
            "memory_optimize_level": None, "enable_graph_kernel": False, "check_bprop": False}


def set_context(**kwargs):
    """Sets process-wide options: mode (PYNATIVE_MODE or GRAPH_MODE), device_target ('CPU';
    'GPU' where CUDA kernels exist), runtime_num_threads (the kernels' thread count), and
    MindSpore's other keys, accepted for compatibility (device_id, deterministic, save_graphs,
    ...). GRAPH_MODE: Model.train and value_and_grad's functions capture each training step
    once per input signature and replay it as an optimized graph (src/graph, as `zenith train
    --mode graph`); other code runs eagerly in both modes.
    Unknown keys raise ValueError."""
    unknown = sorted(set(kwargs) - set(_CONTEXT))
    if unknown:
        raise ValueError(f"set_context: unknown key(s) {unknown}; known: {sorted(_CONTEXT)}")
    mode = kwargs.get("mode", _CONTEXT["mode"])
    if mode not in (PYNATIVE_MODE, GRAPH_MODE):
        raise ValueError(f"set_context: mode must be PYNATIVE_MODE or GRAPH_MODE, got {mode!r}")
    target = kwargs.get("device_target", _CONTEXT["device_target"])
    if not isinstance(target, str):
        raise TypeError(f"set_context: device_target must be a string, got {target!r}")
    threads = kwargs.get("runtime_num_threads", _CONTEXT["runtime_num_threads"]) or 0
    _C.context.set_context(int(mode), target, int(threads))
    _CONTEXT.update(kwargs)


def get_context(attr_key):
    """The value of a set_context key."""
    if attr_key not in _CONTEXT:
        raise ValueError(f"get_context: unknown key {attr_key!r}; known: {sorted(_CONTEXT)}")
    if attr_key == "runtime_num_threads" and _CONTEXT[attr_key] is None:
        return _C.context.get_num_threads()
    return _CONTEXT[attr_key]


_SEED = [None]


def set_seed(seed):
    """Seeds the global random generator (initialisers, dropout, random ops) and the data
    pipeline's shuffles and random transforms."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"set_seed: seed must be a non-negative int, got {seed!r}")
    _C.context.manual_seed(seed)
    _C.data.config.set_seed(seed)
    _SEED[0] = seed


def get_seed():
    """The seed given to set_seed (None before)."""
    return _SEED[0]


class ParallelMode:
    """Parallel modes (MindSpore's ParallelMode); zenith runs stand_alone, data_parallel and
    semi_auto_parallel (Dense shard strategies)."""
    STAND_ALONE = "stand_alone"
    DATA_PARALLEL = "data_parallel"
    SEMI_AUTO_PARALLEL = "semi_auto_parallel"
    AUTO_PARALLEL = "auto_parallel"
    HYBRID_PARALLEL = "hybrid_parallel"


_PARALLEL_DEFAULTS = {"parallel_mode": ParallelMode.STAND_ALONE, "gradients_mean": False,
                      "device_num": 1, "global_rank": 0, "parameter_broadcast": False,
                      "bucket_cap_mb": 25.0, "pipeline_stages": 1,
                      "enable_parallel_optimizer": False, "parallel_optimizer_config": {},
                      "pipeline_config": {}}
_PARALLEL = dict(_PARALLEL_DEFAULTS)


def set_auto_parallel_context(**kwargs):
    """parallel_mode='data_parallel' makes Model wrap its network in DistributedDataParallel
    (rank 0's parameters broadcast, gradients averaged across ranks during backward; needs
    gradients_mean=True: zenith averages). device_num and global_rank are checked against the
    job's group once communication.init() ran. bucket_cap_mb sets DDP's bucket size.
    parallel_mode='semi_auto_parallel' makes dense.matmul.shard(strategy) split a Dense's weight
    over the ranks (zenith.nn.shard: row or column tensor parallel).
    enable_parallel_optimizer=True (data_parallel, semi_auto_parallel): optimizers made
    afterwards shard their states over the ranks, ZeRO stage 1 (zenith.nn.parallel_optimizer);
    parallel_optimizer_config takes MindSpore's 'parallel_optimizer_threshold' (KB, default 64:
    smaller parameters stay whole), 'optimizer_weight_shard_size' (-1 only) and
    'gradient_accumulation_shard' (False only). pipeline_stages=N (semi_auto_parallel, N the
    job's ranks): nn.PipelineCell runs the cells' pipeline_stage split over micro-batches
    (zenith.nn.pipeline); pipeline_config={'pipeline_scheduler': '1f1b' (default) or 'gpipe'}."""
    unknown = sorted(set(kwargs) - set(_PARALLEL_DEFAULTS))
    if unknown:
        raise ValueError(f"set_auto_parallel_context: unknown key(s) {unknown}; known: "
                         f"{sorted(_PARALLEL_DEFAULTS)}")
    mode = kwargs.get("parallel_mode", _PARALLEL["parallel_mode"])
    if mode not in (ParallelMode.STAND_ALONE, ParallelMode.DATA_PARALLEL,
                    ParallelMode.SEMI_AUTO_PARALLEL):
        raise ValueError(f"set_auto_parallel_context: parallel_mode {mode!r} is not supported "
                         "(zenith runs 'stand_alone', 'data_parallel' and 'semi_auto_parallel')")
    from zenith._unsupported import UnsupportedError
    stages = kwargs.get("pipeline_stages", _PARALLEL["pipeline_stages"])
    if isinstance(stages, bool) or not isinstance(stages, int) or stages < 1:
        raise ValueError(f"set_auto_parallel_context: pipeline_stages must be an int >= 1, got "
                         f"{stages!r}")
    if stages > 1 and mode != ParallelMode.SEMI_AUTO_PARALLEL:
        raise UnsupportedError(f"set_auto_parallel_context: pipeline_stages={stages} needs "
                               f"parallel_mode='semi_auto_parallel', got {mode!r}")
    if not isinstance(kwargs.get("enable_parallel_optimizer", False), bool):
        raise TypeError("set_auto_parallel_context: enable_parallel_optimizer must be a bool, "
                        f"got {kwargs['enable_parallel_optimizer']!r}")
    if "parallel_optimizer_config" in kwargs:
        from zenith.nn.parallel_optimizer import check_config
        kwargs = dict(kwargs, parallel_optimizer_config=check_config(
            kwargs["parallel_optimizer_config"]))
    if "pipeline_config" in kwargs:
        from zenith.nn.pipeline import check_config as check_pipeline
        kwargs = dict(kwargs, pipeline_config=check_pipeline(kwargs["pipeline_config"]))
    _PARALLEL.update(kwargs)


def get_auto_parallel_context(attr_key):
    """The value of a set_auto_parallel_context key."""
    if attr_key not in _PARALLEL:
        raise ValueError(f"get_auto_parallel_context: unknown key {attr_key!r}")
    if attr_key == "parallel_optimizer_config":
        from zenith.nn.parallel_optimizer import DEFAULT_CONFIG
        return dict(DEFAULT_CONFIG, **_PARALLEL[attr_key])
    if attr_key == "pipeline_config":
        from zenith.nn.pipeline import DEFAULT_CONFIG
        return dict(DEFAULT_CONFIG, **_PARALLEL[attr_key])
    return _PARALLEL[attr_key]


def reset_auto_parallel_context():
    """Back to stand_alone and the defaults."""
    _PARALLEL.clear()
    _PARALLEL.update(_PARALLEL_DEFAULTS)
