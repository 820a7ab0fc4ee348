"""save_checkpoint, load_checkpoint, load_param_into_net with MindSpore's arguments.

The files are zenith's checkpoints: safetensors with parameters and buffers by dotted name
(whatever the file name's extension), the same files the C++ side, ModelCheckpoint, `zenith
train` and `zenith eval` write and read.
"""

import os

from zenith import _zenith as _C
from zenith._tensor import Parameter, Tensor, _as_tensor
from zenith.nn.cell import Cell

__all__ = ["save_checkpoint", "load_checkpoint", "load_param_into_net"]


def _path(ckpt_file_name):
    path = os.fspath(ckpt_file_name)
    return path if os.path.splitext(path)[1] else path + ".ckpt"


def save_checkpoint(save_obj, ckpt_file_name, integrated_save=True, async_save=False,
                    append_dict=None, enc_key=None, enc_mode="AES-GCM", choice_func=None,
                    **kwargs):
    """Writes save_obj (a Cell, a dict {name: Tensor}, or MindSpore's list of {'name', 'data'}
    dicts) to ckpt_file_name ('.ckpt' is added when it has no extension), atomically.
    append_dict's values are stored as text in the file's metadata."""
    if enc_key is not None:
        raise ValueError("save_checkpoint: encryption is not supported")
    metadata = {str(k): str(v) for k, v in (append_dict or {}).items()}
    path = _path(ckpt_file_name)
    if isinstance(save_obj, Cell):
        names = None
        if choice_func is not None:
            names = {n for n, _ in save_obj._state_dict().items() if choice_func(n)}
        if names is None:
            _C.train.save_checkpoint(path, save_obj, None, metadata)
            return
        tensors = {n: t for n, t in save_obj._state_dict().items() if n in names}
    elif isinstance(save_obj, dict):
        tensors = {str(n): _as_tensor(v) for n, v in save_obj.items()}
    elif isinstance(save_obj, list):
        tensors = {}
        for entry in save_obj:
            if not isinstance(entry, dict) or "name" not in entry or "data" not in entry:
                raise TypeError("save_checkpoint: list entries must be {'name': ..., 'data': ...}")
            tensors[str(entry["name"])] = _as_tensor(entry["data"])
    else:
        raise TypeError(f"save_checkpoint: save_obj must be a Cell, dict or list, got "
                        f"{type(save_obj).__name__}")
    metadata["format"] = "zenith-checkpoint"
    _C.train.save_safetensors(path, {n: t.contiguous() for n, t in tensors.items()}, metadata)


def load_checkpoint(ckpt_file_name, net=None, strict_load=False, filter_prefix=None,
                    dec_key=None, dec_mode="AES-GCM", specify_prefix=None, choice_func=None):
    """{name: Parameter} of the file's tensors (the optimizer's state under 'optimizer.' too);
    with net, also loads them into it (load_param_into_net)."""
    if dec_key is not None:
        raise ValueError("load_checkpoint: decryption is not supported")
    path = os.fspath(ckpt_file_name)
    if not os.path.exists(path):
        raise ValueError(f"load_checkpoint: {path} does not exist")
    tensors, _ = _C.train.load_safetensors(path)
    prefixes = (filter_prefix,) if isinstance(filter_prefix, str) else tuple(filter_prefix or ())
    keep = (specify_prefix,) if isinstance(specify_prefix, str) else specify_prefix
    out = {}
    for name in sorted(tensors):
        if prefixes and name.startswith(prefixes):
            continue
        if keep and not name.startswith(tuple(keep)):
            continue
        if choice_func is not None and not choice_func(name):
            continue
        t = tensors[name]
        out[name] = Parameter(t, name=name, requires_grad=t.dtype.is_floating_point)
    if net is not None:
        load_param_into_net(net, out, strict_load)
    return out


def load_param_into_net(net, parameter_dict, strict_load=False):
    """Copies parameter_dict's values into net's parameters and buffers of the same names
    (shapes must match; names are checked before anything is written). Returns
    (parameters of net not in the dict, names in the dict not in net). strict_load: both
    lists must be empty."""
    if not isinstance(net, Cell):
        raise TypeError(f"load_param_into_net: net must be a Cell, got {type(net).__name__}")
    if not isinstance(parameter_dict, dict):
        raise TypeError("load_param_into_net: parameter_dict must be a dict")
    own = net._state_dict()
    state = {}
    for name, value in parameter_dict.items():
        if not isinstance(value, Tensor):
            value = _as_tensor(value)
        state[name] = value
    param_not_load = [n for n, _ in net._named_parameters() if n not in state]
    ckpt_not_load = [n for n in state if n not in own]
    if strict_load and (param_not_load or ckpt_not_load):
        raise ValueError(f"load_param_into_net: not loaded: {param_not_load}; not in the "
                         f"network: {ckpt_not_load}")
    net._load_state_dict({n: t for n, t in state.items() if n in own}, False)
    return param_not_load, ckpt_not_load
