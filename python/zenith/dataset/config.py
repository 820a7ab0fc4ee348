"""Pipeline defaults (mindspore.dataset.config): the seed of shuffles and random transforms,
the default number of map() workers, and the items each worker computes ahead."""

from zenith import _zenith as _C

__all__ = ["set_seed", "get_seed", "set_num_parallel_workers", "get_num_parallel_workers",
           "set_prefetch_size", "get_prefetch_size"]


def set_seed(seed):
    """Seed of shuffle() and random transforms of pipelines made afterwards."""
    _C.data.config.set_seed(int(seed))


def get_seed():
    """The pipeline seed."""
    return _C.data.config.get_seed()


def set_num_parallel_workers(num):
    """Default worker threads of map() (initially 1)."""
    _C.data.config.set_num_parallel_workers(int(num))


def get_num_parallel_workers():
    """The default worker threads of map()."""
    return _C.data.config.get_num_parallel_workers()


def set_prefetch_size(size):
    """Items each worker computes ahead of the consumer (initially 2)."""
    _C.data.config.set_prefetch_size(int(size))


def get_prefetch_size():
    """Items each worker computes ahead."""
    return _C.data.config.get_prefetch_size()
