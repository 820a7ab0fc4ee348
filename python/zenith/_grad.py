"""zenith.value_and_grad and zenith.grad: MindSpore 2's functional autograd on the C++ tape.

    grad_fn = zenith.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)
    (loss, logits), grads = grad_fn(data, label)
    optimizer(grads)

The function runs eagerly with its inputs at grad_position made leaves that require gradients;
the gradients are then taken of its (first, with has_aux) output with respect to those inputs
and the weights, without touching any accumulated .grad.

In GRAPH_MODE (zenith.set_context(mode=zenith.GRAPH_MODE)) the returned function is a graph
step (src/graph, as `zenith train --mode graph`): its first call per input signature runs
eagerly under capture (forward and backward become one optimized graph, the log prints
"graph: N ops -> M after fusion ..."), later calls replay the graph without entering fn. fn
must be a function of its tensor inputs and of the state: the weights and the parameters and
buffers of the Cells fn reaches (its globals, closure or self); other values it reads are
frozen at capture. A construct that reads a value on the host (control flow on data:
.asnumpy(), .item(), float()) cannot be captured: that signature runs eagerly, the reason
logged once.
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


# How many value_and_grad functions are running their fn now (zenith.jit reads it), and how
# many zenith.jit captures are running (value_and_grad's functions in them are recorded there).
_differentiating = [0]
_jit_capturing = [0]


def _make(fn, grad_position, weights, has_aux, return_ids):
    positions = _positions(grad_position)
    params = _weights(weights)
    if positions is None and not params:
        raise ValueError("grad_position and weights cannot both be None")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")

    def eager(*args, **kwargs):
        args = list(args)
        leaves = []
        previous = _C.autograd.is_grad_enabled()
        _C.autograd.set_grad_enabled(True)
        _differentiating[0] += 1  # a jit function fn calls runs eagerly (on the tape)
        try:
            for p in positions or ():
                if not -len(args) <= p < len(args):
                    raise ValueError(f"grad_position {p} is out of range for {len(args)} inputs")
                x = _as_tensor(args[p])
                if not x.dtype.is_floating_point:
                    raise TypeError(f"input {p} is {x.dtype!r}; gradients need a floating tensor")
                # Nested in another gradient function's fn, an input that function tracks is
                # kept (not detached), so the outer gradient flows through this one.
                leaf = x if _differentiating[0] > 1 and x.requires_grad else x.detach()
                leaf.requires_grad = True
                args[p] = leaf
                leaves.append(leaf)
            out = fn(*args, **kwargs)
        finally:
            _differentiating[0] -= 1
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
            # Inside another gradient function's fn (zenith.grad(zenith.grad(f))), the gradients
            # are themselves recorded on the tape, so the outer one differentiates them.
            grads = _C.autograd.grad(targets, inputs, ones, _differentiating[0] > 0)
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

    graph = _GraphStep(fn, params)

    def run(*args, **kwargs):
        if _C.context.get_mode() == _C.context.GRAPH_MODE and not _jit_capturing[0]:
            return graph(eager, args, kwargs)
        return eager(*args, **kwargs)

    run._graph = graph  # its captures and replays, for tests

    return run


# ---- GRAPH_MODE: a value_and_grad call as a captured and replayed graph step


def _flatten(obj, leaves):
    """A structure of tensors as (spec, leaves): tuples and lists kept, other values constant."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return ("tensor",)
    if isinstance(obj, (tuple, list)):
        return ("seq", type(obj), [_flatten(o, leaves) for o in obj])
    return ("const", obj)


def _unflatten(spec, leaves):
    if spec[0] == "tensor":
        return next(leaves)
    if spec[0] == "const":
        return spec[1]
    return spec[1](_unflatten(s, leaves) for s in spec[2])


def _reachable_cells(fn):
    """The Cells fn uses: itself, its self, its closure and the globals its code names (one
    level of helper functions deep)."""
    from zenith.nn.cell import Cell
    cells, seen = [], set()

    def visit(obj, depth):
        if isinstance(obj, Cell):
            if id(obj) not in seen:
                seen.add(id(obj))
                cells.append(obj)
            return
        if depth > 1:
            return
        f = getattr(obj, "__func__", obj)
        visit(getattr(obj, "__self__", None), depth + 1)
        code = getattr(f, "__code__", None)
        if code is None:
            return
        for name in code.co_names:
            visit(f.__globals__.get(name), depth + 1)
        for cell in f.__closure__ or ():
            try:
                visit(cell.cell_contents, depth + 1)
            except ValueError:  # an empty closure cell
                pass

    visit(fn, 0)
    return cells


def _log(line):
    print(line, flush=True)


class _GraphStep:
    """value_and_grad's function in GRAPH_MODE: a graph::StepCompiler over the weights and the
    parameters and buffers of the Cells fn reaches."""

    def __init__(self, fn, weights):
        self._fn = fn
        self._weights = weights
        self._compiler = None
        self._specs = {}
        self._cells = None

    def _state(self):
        state, seen = [], set()

        def add(name, t):
            if t._id() not in seen:
                seen.add(t._id())
                state.append((name, t))

        for i, cell in enumerate(self._cells):
            for n, t in cell._named_parameters():
                add(f"cell{i}.{n}", t)
            for n, t in cell._named_buffers():
                add(f"cell{i}.{n}", t)
        for i, w in enumerate(self._weights):
            add(f"weight{i}", w)
        return state

    def __call__(self, eager, args, kwargs):
        args = [_as_tensor(a) if type(a).__module__ == "numpy" else a for a in args]
        inputs = [a for a in args if isinstance(a, Tensor)]
        inputs += [kwargs[k] for k in sorted(kwargs) if isinstance(kwargs[k], Tensor)]
        if self._cells is None:
            self._cells = _reachable_cells(self._fn)
        # What the tensors do not show: the other arguments (frozen into the graph) and whether
        # the cells train (dropout, batch statistics).
        tag = repr([None if isinstance(a, Tensor) else a for a in args] +
                   sorted((k, None if isinstance(v, Tensor) else v) for k, v in kwargs.items()) +
                   [c.training for c in self._cells])
        key = (tag, tuple((tuple(t.shape), str(t.dtype)) for t in inputs))
        if self._compiler is None:
            self._compiler = _C.graph.StepCompiler(self._state(), _log)
        captured = {}

        def phase():
            out = eager(*args, **kwargs)
            leaves = []
            captured["spec"] = _flatten(out, leaves)
            return leaves

        leaves = self._compiler.run(inputs, tag, phase)
        if "spec" in captured:
            self._specs[key] = captured["spec"]
        return _unflatten(self._specs[key], iter(leaves))


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
