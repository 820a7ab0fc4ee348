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
    if any(isinstance(p, dict) for p in params):
        raise ValueError("parameter groups (dicts) are not supported; pass a list of Parameters")
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"optimizer parameters must be Parameters, got {type(p).__name__}")
    if not params:
        raise ValueError("the optimizer got an empty parameter list")
    return ParameterTuple(p if isinstance(p, Parameter) else Parameter._wrap(p, None)
                          for p in params)


class Optimizer(Cell):
    """The base of optimizers: parameters (a ParameterTuple), learning_rate, and
    construct(gradients), which applies one step from gradients in parameter order."""

    def __init__(self, learning_rate, parameters, weight_decay=0.0, loss_scale=1.0):
        super().__init__()
        if loss_scale != 1.0:
            raise ValueError("loss_scale is not supported (gradients are not scaled)")
        if weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        self.parameters = _parameters(parameters)
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay

    def construct(self, gradients):
        self._opt.apply(list(gradients))
        return True

    def get_lr(self):
        """The learning rate of the next step, as a float32 Tensor."""
        return Tensor(self._opt.current_lr)

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
        self._opt = _C.optim.Momentum(list(self.parameters), _schedule(learning_rate),
                                      float(momentum), float(weight_decay), bool(use_nesterov))


class SGD(Optimizer):
    """Stochastic gradient descent (mindspore.nn.SGD), optional momentum and Nesterov."""

    def __init__(self, params, learning_rate=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        if dampening != 0.0:
            raise ValueError("SGD: dampening is not supported")
        self.momentum = momentum
        self._opt = _C.optim.SGD(list(self.parameters), _schedule(learning_rate), float(momentum),
                                 float(weight_decay), bool(nesterov))


class Adam(Optimizer):
    """Adam (mindspore.nn.Adam); weight_decay is L2 added to the gradient."""

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                 use_locking=False, use_nesterov=False, weight_decay=0.0, loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        if use_nesterov:
            raise ValueError("Adam: use_nesterov is not supported")
        self._opt = _C.optim.Adam(list(self.parameters), _schedule(learning_rate), float(beta1),
                                  float(beta2), float(eps), float(weight_decay))


class AdamW(Optimizer):
    """Adam with decoupled weight decay (PyTorch's AdamW defaults: eps 1e-8, weight_decay 1e-2)."""

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                 weight_decay=1e-2, loss_scale=1.0):
        super().__init__(learning_rate, params, weight_decay, loss_scale)
        self._opt = _C.optim.AdamW(list(self.parameters), _schedule(learning_rate), float(beta1),
                                   float(beta2), float(eps), float(weight_decay))


class AdamWeightDecay(AdamW):
    """mindspore.nn.AdamWeightDecay: AdamW with MindSpore's defaults (eps 1e-6, weight_decay 0)."""

    def __init__(self, params, learning_rate=1e-3, beta1=0.9, beta2=0.999, eps=1e-6,
                 weight_decay=0.0):
        super().__init__(params, learning_rate, beta1, beta2, eps, weight_decay)
