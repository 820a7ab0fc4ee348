"""Optimizers with MindSpore's names and arguments (mindspore.nn), on the C++ optimizers.

An optimizer is a Cell called with gradients, as in MindSpore 2's functional loop:

    grad_fn = zenith.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)
    (loss, _), grads = grad_fn(data, label)
    optimizer(grads)

Model.train drives the same C++ optimizer without Python. learning_rate is a number, a list or
1-d Tensor of per-step rates (the last one holds afterwards), or a LearningRateSchedule cell.
"""

from zenith import _zenith as _C
from zenith._tensor import Parameter, ParameterTuple, Tensor
from zenith.nn.cell import Cell
from zenith.nn.learning_rate import LearningRateSchedule

__all__ = ["Optimizer", "Momentum", "SGD", "Adam", "AdamW", "AdamWeightDecay"]


def _schedule(learning_rate):
    """The C++ schedule for a MindSpore learning_rate argument."""
    if isinstance(learning_rate, bool):
        raise TypeError("learning_rate must be a number, list, Tensor or LearningRateSchedule")
    if isinstance(learning_rate, (int, float)):
        if learning_rate < 0:
            raise ValueError(f"learning_rate must be >= 0, got {learning_rate}")
        return _C.optim.constant_lr(float(learning_rate))
    if isinstance(learning_rate, Tensor):
        if learning_rate.ndim == 0:
            return _schedule(float(learning_rate.item()))
        return _C.optim.list_lr([float(v) for v in learning_rate.asnumpy().reshape(-1)])
    if isinstance(learning_rate, (list, tuple)):
        return _C.optim.list_lr([float(v) for v in learning_rate])
    if isinstance(learning_rate, LearningRateSchedule):
        return _C.optim.python_lr(learning_rate._rate)
    if callable(learning_rate):
        return _C.optim.python_lr(lambda step: float(learning_rate(step)))
    raise TypeError(f"learning_rate must be a number, list, Tensor or LearningRateSchedule, got "
                    f"{type(learning_rate).__name__}")


def _parameters(params):
    if isinstance(params, Tensor):
        params = [params]
    params = list(params)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"optimizer parameters must be Parameters, got {type(p).__name__}")
    if not params:
        raise ValueError("the optimizer got an empty parameter list")
    return ParameterTuple(p if isinstance(p, Parameter) else Parameter._wrap(p, None)
                          for p in params)


def _groups(parameters, learning_rate, weight_decay):
    """MindSpore's params argument as groups [{'params', 'lr', 'weight_decay'}]: a list of
    Parameters is one group; a list of dicts gives one group each, with 'lr' and
    'weight_decay' defaulting to the optimizer's ('order_params' is accepted and ignored)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    if not any(isinstance(p, dict) for p in parameters):
        return [{"params": _parameters(parameters), "lr": learning_rate,
                 "weight_decay": weight_decay}]
    groups = []
    for i, g in enumerate(parameters):
        if not isinstance(g, dict) or "params" not in g:
            raise TypeError(f"parameter group {i} must be a dict with 'params', got {g!r}")
        if "order_params" in g:
            continue
        unknown = sorted(set(g) - {"params", "lr", "weight_decay", "grad_centralization"})
        if unknown:
            raise ValueError(f"parameter group {i}: unknown key(s) {unknown}")
        groups.append({"params": _parameters(g["params"]), "lr": g.get("lr", learning_rate),
                       "weight_decay": g.get("weight_decay", weight_decay)})
    return groups


def _check_weight_decay(wd):
    if isinstance(wd, Cell):
        return wd
    if isinstance(wd, bool) or not isinstance(wd, (int, float)):
        raise TypeError(f"weight_decay must be a number or a Cell, got {type(wd).__name__}")
    if wd < 0:
        raise ValueError(f"weight_decay must be >= 0, got {wd}")
    return float(wd)


class _Grouped:
    """One C++ optimizer per parameter group, applied as one (optimizer(grads) only)."""

    def __init__(self, opts, sizes):
        self.opts, self.sizes = opts, sizes

    def apply(self, grads):
        start = 0
        for opt, n in zip(self.opts, self.sizes):
            opt.apply(grads[start:start + n])
            start += n

    current_lr = property(lambda self: self.opts[0].current_lr)
    step_count = property(lambda self: self.opts[0].step_count)

    def step(self):
        for opt in self.opts:
            opt.step()

    def zero_grad(self):
        for opt in self.opts:
            opt.zero_grad()


class Optimizer(Cell):
    """The base of optimizers: parameters (a ParameterTuple), learning_rate, and
    construct(gradients), which applies one step from gradients in parameter order.

    parameters: a list of Parameters, or MindSpore's groups, a list of dicts {'params': [...],
    'lr': ..., 'weight_decay': ...} (groups run in optimizer(grads) calls, not in Model.train).
    weight_decay: a number, or a Cell called with the global step (a Tensor) giving the decay
    of that step (added to the gradients as L2; optimizer(grads) calls only)."""

    def __init__(self, learning_rate, parameters, weight_decay=0.0, loss_scale=1.0):
        super().__init__()
        if loss_scale != 1.0:
            raise ValueError("loss_scale is not supported (gradients are not scaled)")
        weight_decay = _check_weight_decay(weight_decay)
        self.group_params = _groups(parameters, learning_rate, weight_decay)
        for g in self.group_params:
            g["weight_decay"] = _check_weight_decay(g["weight_decay"])
        self.is_group = len(self.group_params) > 1 or any(
            isinstance(p, dict) for p in (parameters if isinstance(parameters, list) else []))
        self.parameters = ParameterTuple(p for g in self.group_params for p in g["params"])
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self._dynamic_wd = [g["weight_decay"] if isinstance(g["weight_decay"], Cell) else None
                            for g in self.group_params]

    def _build(self, make):
        """Sets self._opt from make(params, schedule, weight_decay) for each group."""
        from zenith.nn.parallel_optimizer import make_optimizer  # ZeRO-1 when enabled
        opts = [make_optimizer(make, list(g["params"]), _schedule(g["lr"]),
                               0.0 if isinstance(g["weight_decay"], Cell) else g["weight_decay"])
                for g in self.group_params]
        self._opt = opts[0] if len(opts) == 1 else _Grouped(
            opts, [len(g["params"]) for g in self.group_params])

    def _model_optimizer(self):
        """The C++ optimizer Model.train drives (one group, numeric weight decay)."""
        if isinstance(self._opt, _Grouped) or any(w is not None for w in self._dynamic_wd):
            raise ValueError("Model: an optimizer with parameter groups or a Cell weight_decay "
                             "runs only in optimizer(grads) calls (MindSpore 2's functional "
                             "loop); Model.train needs one group and a numeric weight_decay")
        return self._opt

    def construct(self, gradients):
        gradients = list(gradients)
        if any(w is not None for w in self._dynamic_wd):
            step = Tensor(self._opt.step_count)
            start = 0
            for g, wd in zip(self.group_params, self._dynamic_wd):
                n = len(g["params"])
                if wd is not None:
                    decay = wd(step)
                    for i in range(start, start + n):
                        gradients[i] = gradients[i] + self.parameters[i] * decay
                start += n
        self._opt.apply(gradients)
        return True

    def get_lr(self):
        """The learning rate of the next step, as a float32 Tensor."""
        opt = self.__dict__.get("_opt")
        if opt is None:  # a Python optimizer (subclass without a C++ one)
            lr = self.learning_rate
            return lr if isinstance(lr, Tensor) else Tensor(float(lr))
        return Tensor(opt.current_lr)

    @property
    def global_step(self):
        """Steps taken so far."""
        return self._opt.step_count

    def step(self):
        """One step from the parameters' accumulated gradients (PyTorch style)."""
        self._opt.step()

    def zero_grad(self):
        """Drops the parameters' accumulated gradients."""
        self._opt.zero_grad()


class Momentum(Optimizer):
    """SGD with momentum (mindspore.nn.Momentum): v = momentum v + (g + weight_decay p);
    p -= lr v (use_nesterov: p -= lr (g + momentum v))."""

    def __init__(self, params, learning_rate, momentum, weight_decay=0.0, loss_scale=1.0,
                 use_nesterov=False):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        if momentum < 0:
            raise ValueError(f"momentum must be >= 0, got {momentum}")
        self.momentum = momentum
        self._build(lambda p, lr, wd: _C.optim.Momentum(p, lr, float(momentum), wd,
                                                        bool(use_nesterov)))


class SGD(Optimizer):
    """Stochastic gradient descent (mindspore.nn.SGD), optional momentum and Nesterov."""

    def __init__(self, params, learning_rate=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        if dampening != 0.0:
            raise ValueError("SGD: dampening is not supported")
        self.momentum = momentum
        self._build(lambda p, lr, wd: _C.optim.SGD(p, lr, float(momentum), wd, bool(nesterov)))


class Adam(Optimizer):
    """Adam (mindspore.nn.Adam); weight_decay is L2 added to the gradient."""

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                 use_locking=False, use_nesterov=False, weight_decay=0.0, loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        if use_nesterov:
            raise ValueError("Adam: use_nesterov is not supported")
        self._build(lambda p, lr, wd: _C.optim.Adam(p, lr, float(beta1), float(beta2),
                                                    float(eps), wd))


class AdamW(Optimizer):
    """Adam with decoupled weight decay (PyTorch's AdamW defaults: eps 1e-8, weight_decay 1e-2)."""

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                 weight_decay=1e-2, loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        if isinstance(weight_decay, Cell):
            raise ValueError("AdamW: weight_decay must be a number (the decay is decoupled)")
        self._build(lambda p, lr, wd: _C.optim.AdamW(p, lr, float(beta1), float(beta2),
                                                     float(eps), wd))


class AdamWeightDecay(AdamW):
    """mindspore.nn.AdamWeightDecay: AdamW with MindSpore's defaults (eps 1e-6, weight_decay 0)."""

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-6,
                 weight_decay=0.0):
        super().__init__(params, learning_rate, beta1, beta2, eps, weight_decay)
