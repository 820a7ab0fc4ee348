"""zenith.communication: the ranks of a job (mindspore.communication).

    from zenith.communication import init, get_rank, get_group_size
    init()   # joins the job's group from RANK_ID/RANK_SIZE (or RANK/WORLD_SIZE), as the
             # platform (zenith run / zenith submit) sets them for every rank

Collectives run over Gloo's TCP transport between the ranks' processes.
"""

from zenith import _zenith as _C

__all__ = ["init", "release", "get_rank", "get_group_size", "get_local_rank",
           "get_local_rank_size", "is_initialized", "GlobalComm", "HCCL_WORLD_COMM_GROUP",
           "all_reduce", "broadcast", "all_gather", "barrier"]

HCCL_WORLD_COMM_GROUP = "hccl_world_group"


class GlobalComm:
    """The world group's name (MindSpore's GlobalComm); zenith has only the world group."""
    BACKEND = "gloo"
    WORLD_COMM_GROUP = HCCL_WORLD_COMM_GROUP
    INITED = False


def _world(group):
    if group not in (None, HCCL_WORLD_COMM_GROUP, "nccl_world_group"):
        raise ValueError(f"unknown group {group!r}: zenith has only the world group")


def init(backend_name=None):
    """Joins the job's ranks, reading RANK_ID/RANK_SIZE (or RANK/WORLD_SIZE), MASTER_ADDR/
    MASTER_PORT or the rank table from the environment. backend_name ('hccl', 'nccl', 'gloo')
    is accepted; CPU tensors use Gloo, CUDA tensors NCCL where built. The GIL is released while
    the ranks meet."""
    if backend_name not in (None, "hccl", "nccl", "gloo", "mccl"):
        raise ValueError(f"init: unknown backend {backend_name!r}")
    _C.communication.init()
    GlobalComm.INITED = True


def release():
    """Leaves the group (after a barrier)."""
    _C.communication.release()
    GlobalComm.INITED = False


def is_initialized():
    """Whether init() has joined this process to a group."""
    return _C.communication.is_initialized()


def get_rank(group=None):
    """This process's rank in the job (zenith.Error before init())."""
    _world(group)
    return _C.communication.get_rank()


def get_group_size(group=None):
    """The number of ranks in the job."""
    _world(group)
    return _C.communication.get_group_size()


def get_local_rank(group=None):
    """This rank's index on its node (LOCAL_RANK, else DEVICE_ID, else the rank)."""
    import os
    _world(group)
    for var in ("LOCAL_RANK", "DEVICE_ID"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return get_rank()


def get_local_rank_size(group=None):
    """The number of ranks on this node (LOCAL_WORLD_SIZE, else the group size)."""
    import os
    _world(group)
    value = os.environ.get("LOCAL_WORLD_SIZE", "")
    return int(value) if value.isdigit() else get_group_size()


def all_reduce(tensor, op="sum"):
    """In place: tensor <- op over the ranks of tensor (op 'sum', 'mean', 'max', 'min')."""
    _C.communication.all_reduce(tensor, op)
    return tensor


def broadcast(tensor, root=0):
    """In place: tensor <- rank root's tensor."""
    _C.communication.broadcast(tensor, root)
    return tensor


def all_gather(tensor):
    """[group size, *tensor.shape]: every rank's tensor, in rank order."""
    return _C.communication.all_gather(tensor)


def barrier():
    """Waits until every rank arrives."""
    _C.communication.barrier()
