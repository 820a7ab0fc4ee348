"""nn.TrainOneStepCell, WithEvalCell, WithGradCell, ForwardValueAndGrad (mindspore.nn's
wrapper cells) on zenith.value_and_grad."""

from zenith._grad import value_and_grad
from zenith.nn.cell import Cell


class TrainOneStepCell(Cell):
    """cell(*inputs): gradients of network(*inputs) (a loss, e.g. a WithLossCell) with respect
    to optimizer.parameters, scaled by sens, applied by the optimizer; returns the loss."""

    def __init__(self, network, optimizer, sens=None, return_grad=False):
        super().__init__()
        self.network, self.optimizer = network, optimizer
        self.sens, self.return_grad = 1.0 if sens is None else float(sens), return_grad
        self.weights = optimizer.parameters
        self._grad_fn = value_and_grad(lambda *x: self.network(*x), None, self.weights)

    def construct(self, *inputs):
        loss, grads = self._grad_fn(*inputs)
        if self.sens != 1.0:
            grads = tuple(g * self.sens for g in grads)
        self.optimizer(grads)
        return (loss, grads) if self.return_grad else loss


class WithEvalCell(Cell):
    """cell(data, label) -> (loss, outputs, label) of network(data) and loss_fn."""

    def __init__(self, network, loss_fn, add_cast_fp32=False):
        super().__init__()
        self.network, self._loss_fn = network, loss_fn
        self.add_cast_fp32 = add_cast_fp32

    def construct(self, data, label):
        outputs = self.network(data)
        if self.add_cast_fp32:
            from zenith._tensor import float32
            outputs = outputs.astype(float32)
        return self._loss_fn(outputs, label), outputs, label


class WithGradCell(Cell):
    """cell(*inputs) -> the gradients of loss_fn(network(data), label) (or of network's output
    when loss_fn is None) with respect to the network's trainable parameters."""

    def __init__(self, network, loss_fn=None, sens=None):
        super().__init__()
        self.network, self._loss_fn = network, loss_fn
        self.sens = 1.0 if sens is None else float(sens)
        self.weights = network.trainable_params()

        def forward(*x):
            if self._loss_fn is None:
                return self.network(*x)
            return self._loss_fn(self.network(*x[:-1]), x[-1])
        self._grad_fn = value_and_grad(forward, None, self.weights)

    def construct(self, *inputs):
        _, grads = self._grad_fn(*inputs)
        return tuple(g * self.sens for g in grads) if self.sens != 1.0 else grads


class ForwardValueAndGrad(Cell):
    """cell(*inputs) -> (network(*inputs), gradients with respect to weights and/or the
    inputs), as value_and_grad."""

    def __init__(self, network, weights=None, get_all=False, get_by_list=False,
                 sens_param=False):
        super().__init__()
        if sens_param:
            raise ValueError("ForwardValueAndGrad: sens_param is not supported")
        self.network = network
        self._get_all, self._weights = get_all, weights if get_by_list else None
        self._get_by_list = get_by_list

    def construct(self, *inputs):
        positions = tuple(range(len(inputs))) if self._get_all else None
        fn = value_and_grad(lambda *x: self.network(*x), positions, self._weights)
        return fn(*inputs)
