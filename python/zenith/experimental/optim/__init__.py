"""mindspore.experimental.optim: optimizers with PyTorch's arguments (lr, betas, eps,
weight_decay, amsgrad) and param_groups, each group's 'lr' a Parameter that
ops.assign or a scheduler (lr_scheduler.StepLR, ...) changes between steps.

    optimizer = optim.Adam(net.trainable_params(), lr=0.1)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.1)
    loss, grads = grad_fn(data, label); optimizer(grads); scheduler.step()

The update runs with zenith.ops on the parameters in place; its values match PyTorch's
torch.optim (tests/python/test_mindspore_api.py)."""

from zenith import ops
from zenith._tensor import Parameter, ParameterTuple, Tensor, float32
from zenith.nn.cell import Cell
from zenith.experimental.optim import lr_scheduler

__all__ = ["Optimizer", "Adam", "AdamW", "SGD", "lr_scheduler"]


class Optimizer(Cell):
    """The base: param_groups (dicts with 'params' and the hyper-parameters, 'lr' a
    Parameter), parameters (all of them), and construct(grads) calling _update per group."""

    def __init__(self, params, defaults):
        super().__init__()
        if isinstance(params, Tensor):
            params = [params]
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.defaults = defaults
        self.param_groups = []
        for i, g in enumerate(groups):
            unknown = sorted(set(g) - set(defaults) - {"params"})
            if unknown:
                raise ValueError(f"param group {i}: unknown key(s) {unknown}; known: "
                                 f"{sorted(defaults)}")
            group = dict(defaults)
            group.update(g)
            group["params"] = list(group["params"])
            group["lr"] = Parameter(Tensor(float(group["lr"]), float32),
                                    name=f"learning_rate_group_{i}", requires_grad=False)
            self.param_groups.append(group)
        self.parameters = ParameterTuple(p for g in self.param_groups for p in g["params"])
        self.state = {}

    def _state(self, p, name):
        key = (id(p), name)
        if key not in self.state:
            self.state[key] = ops.zeros_like(p.detach())
        return self.state[key]

    def construct(self, gradients):
        gradients = list(gradients)
        if len(gradients) != len(self.parameters):
            raise ValueError(f"{type(self).__name__}: {len(gradients)} gradients for "
                             f"{len(self.parameters)} parameters")
        start = 0
        for group in self.param_groups:
            n = len(group["params"])
            self._update(group, group["params"], gradients[start:start + n])
            start += n
        return True

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    v = g[k]
                    lines.append(f"    {k}: {v.asnumpy() if k == 'lr' else v}")
        lines.append(")")
        return "\n".join(lines)


def _lr(group):
    return float(group["lr"].asnumpy())


class Adam(Optimizer):
    """Adam as torch.optim.Adam: weight_decay is L2 added to the gradient; amsgrad keeps the
    maximum of the second moments; maximize ascends."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, *, maximize=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))
        self._steps = 0

    def _decoupled(self):
        return False

    def construct(self, gradients):
        self._steps += 1
        return super().construct(gradients)

    def _update(self, group, params, grads):
        b1, b2 = group["betas"]
        lr, eps, wd, t = _lr(group), float(group["eps"]), float(group["weight_decay"]), \
            self._steps
        for p, g in zip(params, grads):
            w = p.detach()
            g = -g if group["maximize"] else g
            if wd and self._decoupled():
                w._assign(w * (1.0 - lr * wd))
            elif wd:
                g = g + w * wd
            m, v = self._state(p, "exp_avg"), self._state(p, "exp_avg_sq")
            m._assign(m * b1 + g * (1.0 - b1))
            v._assign(v * b2 + g * g * (1.0 - b2))
            denom_v = v
            if group["amsgrad"]:
                vmax = self._state(p, "max_exp_avg_sq")
                vmax._assign(ops.maximum(vmax, v))
                denom_v = vmax
            step_size = lr / (1.0 - b1 ** t)
            denom = ops.sqrt(denom_v / (1.0 - b2 ** t)) + eps
            w._assign(w - m / denom * step_size)


class AdamW(Adam):
    """AdamW as torch.optim.AdamW: decoupled weight decay (default 1e-2)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)

    def _decoupled(self):
        return True


class SGD(Optimizer):
    """SGD as torch.optim.SGD: momentum, dampening, nesterov, L2 weight_decay, maximize."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, *, maximize=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))
        self._steps = 0

    def construct(self, gradients):
        self._steps += 1
        return super().construct(gradients)

    def _update(self, group, params, grads):
        lr, mom = _lr(group), float(group["momentum"])
        damp, wd = float(group["dampening"]), float(group["weight_decay"])
        for p, g in zip(params, grads):
            w = p.detach()
            g = -g if group["maximize"] else g
            if wd:
                g = g + w * wd
            if mom:
                buf = self._state(p, "momentum_buffer")
                buf._assign(g if self._steps == 1 else buf * mom + g * (1.0 - damp))
                g = g + buf * mom if group["nesterov"] else buf
            w._assign(w - g * lr)
