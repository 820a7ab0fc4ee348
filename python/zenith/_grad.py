"""zenith.value_and_grad and zenith.grad: MindSpore 2's functional autograd on the C++ tape.

    grad_fn = zenith.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)
    (loss, logits), grads = grad_fn(data, label)
    optimizer(grads)

The function runs eagerly with its inputs at grad_position made leaves that require gradients;
the gradients are then taken of its (first, with has_aux) output with respect to those inputs
and the weights, without touching any accumulated .grad.
"""

from zenith import _zenith as _C
from zenith._tensor import Tensor, _as_tensor


def _positions(grad_position):
    if grad_position is None:
        return None
    if isinstance(grad_position, bool) or not isinstance(grad_position, (int, tuple, list)):
        raise TypeError(f"grad_position must be None, an int or a tuple of ints, got "
                        f"{type(grad_position).__name__}")
    if isinstance(grad_position, int):
        return (grad_position,)
    for p in grad_position:
        if not isinstance(p, int) or isinstance(p, bool):
            raise TypeError(f"grad_position entries must be ints, got {p!r}")
    return tuple(grad_position)


def _weights(weights):
    if weights is None:
        return []
    if isinstance(weights, Tensor):
        return [weights]
    out = list(weights)
    for w in out:
        if not isinstance(w, Tensor):
            raise TypeError(f"weights must be Parameters, got {type(w).__name__}")
    return out


def _make(fn, grad_position, weights, has_aux, return_ids):
    positions = _positions(grad_position)
    params = _weights(weights)
    if positions is None and not params:
        raise ValueError("grad_position and weights cannot both be None")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")

    def run(*args, **kwargs):
        args = list(args)
        leaves = []
        previous = _C.autograd.is_grad_enabled()
        _C.autograd.set_grad_enabled(True)
        try:
            for p in positions or ():
                if not -len(args) <= p < len(args):
                    raise ValueError(f"grad_position {p} is out of range for {len(args)} inputs")
                x = _as_tensor(args[p])
                if not x.dtype.is_floating_point:
                    raise TypeError(f"input {p} is {x.dtype!r}; gradients need a floating tensor")
                leaf = x.detach()
                leaf.requires_grad = True
                args[p] = leaf
                leaves.append(leaf)
            out = fn(*args, **kwargs)
        finally:
            _C.autograd.set_grad_enabled(previous)
        outputs = out if isinstance(out, tuple) else (out,)
        if has_aux:
            if not isinstance(out, tuple) or len(out) < 2:
                raise ValueError("has_aux=True needs fn to return at least two outputs")
            outputs = outputs[:1]
        for o in outputs:
            if not isinstance(o, Tensor):
                raise TypeError(f"fn must return Tensors, got {type(o).__name__}")
        # MindSpore's sensitivity: ones for every output (the gradient of their sum).
        targets = [o for o in outputs if o.requires_grad]
        inputs = leaves + params
        grads = [None] * len(inputs)
        if targets:
            ones = [_C._full(list(o.shape), 1.0, o.dtype) for o in targets]
            grads = _C.autograd.grad(targets, inputs, ones, False)
        grads = [g if g is not None else _C._zeros(list(x.shape), x.dtype)
                 for g, x in zip(grads, inputs)]
        input_grads = grads[:len(leaves)]
        weight_grads = grads[len(leaves):]
        if return_ids:
            input_grads = [(p, g) for p, g in zip(positions or (), input_grads)]
            weight_grads = [(getattr(w, "name", None), g) for w, g in zip(params, weight_grads)]
        if positions is not None:
            input_part = input_grads[0] if isinstance(grad_position, int) else tuple(input_grads)
        if positions is None:
            result = tuple(weight_grads)
        elif not params:
            result = input_part
        else:
            result = (input_part, tuple(weight_grads))
        return out, result

    return run


def value_and_grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False):
    """A function returning (fn's outputs, gradients).

    grad_position: int or tuple of input indices to differentiate (None: none);
    weights: Parameters to differentiate (e.g. optimizer.parameters);
    gradients: of the inputs (one tensor for an int position, a tuple for a tuple), of the
    weights (a tuple), or (inputs, weights) when both are asked for. has_aux: only fn's first
    output is differentiated, all are returned. return_ids: each gradient comes as
    (position or parameter name, gradient).
    """
    return _make(fn, grad_position, weights, has_aux, return_ids)


def grad(fn, grad_position=0, weights=None, has_aux=False, return_ids=False):
    """A function returning fn's gradients (see value_and_grad); with has_aux, returns
    (gradients, the tuple of outputs after the first)."""
    run = _make(fn, grad_position, weights, has_aux, return_ids)

    def grads_only(*args, **kwargs):
        out, g = run(*args, **kwargs)
        if has_aux:
            return g, out[1:]
        return g

    return grads_only
