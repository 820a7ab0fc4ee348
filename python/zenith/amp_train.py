"""The one-step training cell that zenith.amp.build_train_network returns."""

from zenith._grad import value_and_grad
from zenith.nn.cell import Cell


class TrainOneStepWithLossScale(Cell):
    """cell(data, label): loss = loss_fn(network(data), label) scaled by the loss scaler; the
    gradients are unscaled, applied when finite (the scaler adjusts either way); returns the
    unscaled loss."""

    def __init__(self, network, loss_fn, optimizer, scaler):
        super().__init__()
        self.network = network
        self._loss_fn, self._optimizer, self._scaler = loss_fn, optimizer, scaler

        def forward(*inputs):
            if self._loss_fn is None:  # network computes the loss
                return self._scaler.scale(self.network(*inputs))
            out = self.network(*inputs[:-1])
            loss = self._loss_fn(out, inputs[-1])
            return self._scaler.scale(loss)

        self._grad_fn = value_and_grad(forward, None, optimizer.parameters)

    def construct(self, *inputs, _finite=None):
        from zenith.amp import all_finite
        loss, grads = self._grad_fn(*inputs)
        finite = all_finite(grads)
        if _finite is not None:
            _finite.append(bool(finite.asnumpy()))
        if bool(finite.asnumpy()):
            self._optimizer(self._scaler.unscale(grads))
        self._scaler.adjust(finite)
        return self._scaler.unscale(loss)
