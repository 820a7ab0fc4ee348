"""MindSpore's optimizer parallel: ZeRO stage 1 for zenith.nn's optimizers.

    zenith.communication.init()
    zenith.set_auto_parallel_context(parallel_mode=zenith.ParallelMode.DATA_PARALLEL,
                                     gradients_mean=True, enable_parallel_optimizer=True)
    opt = nn.AdamWeightDecay(net.trainable_params(), 1e-3)   # made after the context is set

An optimizer made while the context asks for it (data_parallel or semi_auto_parallel on more
than one rank) keeps, on rank r of N, the states of rows chunk_of(rows, N, r) of each sharded
parameter only (dim 0; the last shards shorter or empty), updates those rows and all-gathers
the parameters after the step: the parameters are those of the unsharded optimizer, and each
rank holds about 1/N of the optimizer states (Adam's two moments, Momentum's velocity).

The gradients it is given must be the same on every rank, as they are under Model (DDP averages
them), in a value_and_grad loop through DistributedGradReducer, and for semi_auto_parallel's
replicated parameters. A parameter that tensor parallelism already split (Dense.matmul.shard)
is not sharded again, nor one under parallel_optimizer_config's 'parallel_optimizer_threshold'
(KB, MindSpore's default 64). Every parameter must get a gradient every step (the all-gather
is collective). On one host this buys memory per rank, not speed.
"""

from zenith import _zenith as _C
from zenith._unsupported import UnsupportedError

__all__ = ["enabled", "make_optimizer", "state_bytes"]

# parallel_optimizer_config keys MindSpore documents, and what zenith accepts for them.
DEFAULT_CONFIG = {"parallel_optimizer_threshold": 64, "optimizer_weight_shard_size": -1,
                  "gradient_accumulation_shard": False}


def check_config(config):
    """Validates a parallel_optimizer_config dict; returns it with the defaults filled in."""
    if not isinstance(config, dict):
        raise TypeError(f"set_auto_parallel_context: parallel_optimizer_config must be a dict, "
                        f"got {type(config).__name__}")
    unknown = sorted(set(config) - set(DEFAULT_CONFIG))
    if unknown:
        raise ValueError(f"set_auto_parallel_context: parallel_optimizer_config key(s) "
                         f"{unknown} unknown; known: {sorted(DEFAULT_CONFIG)}")
    out = dict(DEFAULT_CONFIG, **config)
    threshold = out["parallel_optimizer_threshold"]
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise ValueError("set_auto_parallel_context: parallel_optimizer_config"
                         f"['parallel_optimizer_threshold'] must be an int >= 0 (KB), got "
                         f"{threshold!r}")
    size = out["optimizer_weight_shard_size"]
    if size != -1 and not (_C.communication.is_initialized()
                           and size == _C.communication.get_group_size()):
        raise UnsupportedError(
            "set_auto_parallel_context: parallel_optimizer_config['optimizer_weight_shard_size']"
            f"={size!r} is not supported (zenith shards the optimizer over every rank: -1)")
    if out["gradient_accumulation_shard"]:
        raise UnsupportedError(
            "set_auto_parallel_context: parallel_optimizer_config['gradient_accumulation_shard']"
            "=True is not supported (zenith's optimizer parallel is ZeRO stage 1: the gradients "
            "stay whole; zenith finetune --zero 2 shards them for a LLaMA)")
    return out


def enabled():
    """Whether an optimizer made now shards its states."""
    from zenith.context import ParallelMode, get_auto_parallel_context
    if not get_auto_parallel_context("enable_parallel_optimizer"):
        return False
    if get_auto_parallel_context("parallel_mode") not in (ParallelMode.DATA_PARALLEL,
                                                          ParallelMode.SEMI_AUTO_PARALLEL):
        return False
    if not _C.communication.is_initialized():
        raise ValueError("enable_parallel_optimizer=True: call zenith.communication.init() "
                         "before making the optimizer")
    return _C.communication.get_group_size() > 1


def _sharded(param, threshold_kb):
    from zenith.nn.shard import is_tensor_parallel
    return (not is_tensor_parallel(param)
            and param.size * param.itemsize >= threshold_kb * 1024
            and getattr(param, "parallel_optimizer", True))


def make_optimizer(make, params, schedule, weight_decay):
    """make(params, schedule, weight_decay) (a C++ optimizer), sharded when enabled()."""
    if not enabled():
        return make(params, schedule, weight_decay)
    from zenith.context import (GRAPH_MODE, ParallelMode, get_auto_parallel_context,
                                get_context)
    if get_auto_parallel_context("pipeline_stages") > 1:
        raise UnsupportedError("enable_parallel_optimizer=True with pipeline_stages > 1 is not "
                               "supported (each stage's optimizer already holds only its "
                               "stage's states)")
    if (get_context("mode") == GRAPH_MODE and get_auto_parallel_context("parallel_mode")
            == ParallelMode.SEMI_AUTO_PARALLEL):
        # A captured step would replay the update without its all-gather (data_parallel's
        # Model runs eagerly anyway: DDP reduces in autograd hooks).
        raise UnsupportedError("enable_parallel_optimizer=True with semi_auto_parallel is not "
                               "supported in GRAPH_MODE; use PYNATIVE_MODE")
    threshold = get_auto_parallel_context("parallel_optimizer_config")[
        "parallel_optimizer_threshold"]
    flags = [_sharded(p, threshold) for p in params]
    return _C.communication.ParallelOptimizer(
        list(params), schedule, flags,
        lambda part: make(part, _C.optim.constant_lr(0.0), weight_decay))


def state_bytes(optimizer):
    """Bytes of optimizer state (moments, velocities) this rank holds for `optimizer` (a
    zenith.nn optimizer), sharded or not."""
    opts = getattr(optimizer._opt, "opts", [optimizer._opt])
    total = 0
    for opt in opts:
        if isinstance(opt, _C.communication.ParallelOptimizer):
            total += opt.state_bytes
        else:
            total += sum(t.nbytes for name, t in opt.state_dict().items() if name != "step")
    return total
