"""mindspore.nn recurrent layers (RNNCell, GRUCell, LSTMCell, RNN, GRU, LSTM), Conv1d, BiDense
and the 3-d forms of BatchNorm, InstanceNorm, Dropout and adaptive pooling, composed of zenith's
differentiable ops. Gate orders and parameter shapes are PyTorch's (MindSpore's are the same)."""

import math

import numpy as np

from zenith import ops
from zenith._tensor import Parameter, Tensor
from zenith.nn.cell import Cell
from zenith.nn.more2 import BatchNorm1d, InstanceNorm2d

__all__ = ["RNNCell", "GRUCell", "LSTMCell", "RNN", "GRU", "LSTM", "Conv1d", "BiDense",
           "BatchNorm3d", "InstanceNorm3d", "Dropout3d", "AdaptiveAvgPool3d",
           "AdaptiveMaxPool3d"]


def _uniform(shape, bound, name):
    return Parameter(Tensor(np.random.uniform(-bound, bound, shape).astype(np.float32)),
                     name=name)


def _linear(x, w, b):
    y = ops.matmul(x, w.swapaxes(0, 1))
    return y if b is None else y + b


def _rnn_step(mode, x, state, w_ih, w_hh, b_ih, b_hh, nonlinearity="tanh"):
    """One step of mode 'rnn', 'gru' or 'lstm' (state: h, or (h, c) for lstm)."""
    h = state[0] if mode == "lstm" else state
    gi, gh = _linear(x, w_ih, b_ih), _linear(h, w_hh, b_hh)
    if mode == "rnn":
        return (ops.tanh if nonlinearity == "tanh" else ops.relu)(gi + gh)
    if mode == "gru":
        size = h.shape[-1]
        r = ops.sigmoid(gi[:, :size] + gh[:, :size])
        z = ops.sigmoid(gi[:, size:2 * size] + gh[:, size:2 * size])
        n = ops.tanh(gi[:, 2 * size:] + r * gh[:, 2 * size:])
        return (1.0 - z) * n + z * h
    size = h.shape[-1]
    g = gi + gh
    i, f = ops.sigmoid(g[:, :size]), ops.sigmoid(g[:, size:2 * size])
    c = f * state[1] + i * ops.tanh(g[:, 2 * size:3 * size])
    return ops.sigmoid(g[:, 3 * size:]) * ops.tanh(c), c


_GATES = {"rnn": 1, "gru": 3, "lstm": 4}


class _CellBase(Cell):
    _mode = "rnn"

    def __init__(self, input_size, hidden_size, has_bias=True, nonlinearity="tanh",
                 dtype=None):
        super().__init__()
        rows, k = _GATES[self._mode] * hidden_size, 1.0 / math.sqrt(hidden_size)
        self.input_size, self.hidden_size, self.nonlinearity = (input_size, hidden_size,
                                                                nonlinearity)
        self.weight_ih = _uniform((rows, input_size), k, "weight_ih")
        self.weight_hh = _uniform((rows, hidden_size), k, "weight_hh")
        self.has_bias = has_bias
        if has_bias:
            self.bias_ih = _uniform((rows,), k, "bias_ih")
            self.bias_hh = _uniform((rows,), k, "bias_hh")

    def construct(self, x, hx):
        return _rnn_step(self._mode, x, hx, self.weight_ih, self.weight_hh,
                         self.bias_ih if self.has_bias else None,
                         self.bias_hh if self.has_bias else None, self.nonlinearity)


class RNNCell(_CellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""


class GRUCell(_CellBase):
    """GRU step; gates r, z, n as PyTorch's."""
    _mode = "gru"

    def __init__(self, input_size, hidden_size, has_bias=True, dtype=None):
        super().__init__(input_size, hidden_size, has_bias)


class LSTMCell(_CellBase):
    """LSTM step on (h, c); gates i, f, g, o as PyTorch's; returns (h', c')."""
    _mode = "lstm"

    def __init__(self, input_size, hidden_size, has_bias=True, dtype=None):
        super().__init__(input_size, hidden_size, has_bias)


class _RNNBase(Cell):
    _mode = "rnn"

    def __init__(self, input_size, hidden_size, num_layers=1, has_bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, nonlinearity="tanh", dtype=None):
        super().__init__()
        if dropout:
            raise ValueError(f"{type(self).__name__}: dropout between layers is not supported")
        self.hidden_size, self.num_layers, self.batch_first = (hidden_size, num_layers,
                                                               batch_first)
        self.has_bias, self.nonlinearity = has_bias, nonlinearity
        self.num_directions = 2 if bidirectional else 1
        rows, k = _GATES[self._mode] * hidden_size, 1.0 / math.sqrt(hidden_size)
        for layer in range(num_layers):
            width = input_size if layer == 0 else hidden_size * self.num_directions
            for suffix in ["", "_reverse"][:self.num_directions]:
                tag = f"_l{layer}{suffix}"
                setattr(self, "weight_ih" + tag, _uniform((rows, width), k, "weight_ih" + tag))
                setattr(self, "weight_hh" + tag, _uniform((rows, hidden_size), k,
                                                          "weight_hh" + tag))
                if has_bias:
                    setattr(self, "bias_ih" + tag, _uniform((rows,), k, "bias_ih" + tag))
                    setattr(self, "bias_hh" + tag, _uniform((rows,), k, "bias_hh" + tag))

    def _run(self, xs, state, tag):
        w = [getattr(self, n + tag, None) for n in ("weight_ih", "weight_hh", "bias_ih",
                                                      "bias_hh")]
        outs = []
        for x in xs:
            state = _rnn_step(self._mode, x, state, *w, self.nonlinearity)
            outs.append(state[0] if self._mode == "lstm" else state)
        return outs, state

    def construct(self, x, hx=None, seq_length=None):
        if seq_length is not None:
            raise ValueError(f"{type(self).__name__}: seq_length is not supported")
        if self.batch_first:
            x = x.swapaxes(0, 1)
        steps, batch = x.shape[0], x.shape[1]
        count = self.num_layers * self.num_directions
        if hx is None:
            zero = ops.zeros((count, batch, self.hidden_size), x.dtype)
            hx = (zero, zero) if self._mode == "lstm" else zero
        xs, finals = [x[t] for t in range(steps)], []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(["", "_reverse"][:self.num_directions]):
                i = layer * self.num_directions + d
                state = (hx[0][i], hx[1][i]) if self._mode == "lstm" else hx[i]
                seq = xs if d == 0 else xs[::-1]
                out, state = self._run(seq, state, f"_l{layer}{suffix}")
                outs.append(out if d == 0 else out[::-1])
                finals.append(state)
            xs = [ops.concat([o[t] for o in outs], -1) if len(outs) > 1 else outs[0][t]
                  for t in range(steps)]
        y = ops.stack(xs, 0)
        if self.batch_first:
            y = y.swapaxes(0, 1)
        if self._mode == "lstm":
            return y, (ops.stack([s[0] for s in finals], 0), ops.stack([s[1] for s in finals], 0))
        return y, ops.stack(finals, 0)


class RNN(_RNNBase):
    """Elman RNN over (seq, batch, input) (batch_first: (batch, seq, input)); returns
    (output, h_n)."""


class GRU(_RNNBase):
    """GRU over a sequence; returns (output, h_n)."""
    _mode = "gru"


class LSTM(_RNNBase):
    """LSTM over a sequence; returns (output, (h_n, c_n))."""
    _mode = "lstm"


class Conv1d(Cell):
    """1-d convolution over (N, C, L): pad_mode 'same', 'valid' or 'pad'; group 1."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, pad_mode="same",
                 padding=0, dilation=1, group=1, has_bias=False, weight_init=None,
                 bias_init=None, dtype=None):
        super().__init__()
        if group != 1:
            raise ValueError("Conv1d: only group=1 is supported")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.dilation = kernel_size, stride, dilation
        self.pad_mode, self.padding, self.has_bias = pad_mode, padding, has_bias
        bound = 1.0 / math.sqrt(in_channels * kernel_size)
        self.weight = _uniform((out_channels, in_channels, kernel_size), bound, "weight")
        if has_bias:
            self.bias = _uniform((out_channels,), bound, "bias")

    def construct(self, x):
        k, s, d = self.kernel_size, self.stride, self.dilation
        span = d * (k - 1) + 1
        if self.pad_mode == "same":
            out = -(-x.shape[-1] // s)
            total = max((out - 1) * s + span - x.shape[-1], 0)
            left, right = total // 2, total - total // 2
        elif self.pad_mode == "pad":
            left = right = self.padding
        else:
            left = right = 0
        if left or right:
            zeros = ops.zeros((x.shape[0], x.shape[1], left + right), x.dtype)
            x = ops.concat([zeros[..., :left], x, zeros[..., left:]], -1)
        out = (x.shape[-1] - span) // s + 1
        taps = [x[:, :, j * d:j * d + (out - 1) * s + 1:s] for j in range(k)]
        patches = ops.stack(taps, 2).reshape((x.shape[0], -1, out))  # N, C*k, L'
        y = ops.matmul(self.weight.reshape((self.out_channels, -1)), patches)
        return y + self.bias.reshape((1, -1, 1)) if self.has_bias else y


class BiDense(Cell):
    """y = x1^T W x2 + b with W [out, in1, in2] (PyTorch's Bilinear)."""

    def __init__(self, in1_channels, in2_channels, out_channels, weight_init=None,
                 bias_init=None, has_bias=True, dtype=None):
        super().__init__()
        bound = 1.0 / math.sqrt(in1_channels)
        self.weight = _uniform((out_channels, in1_channels, in2_channels), bound, "weight")
        self.has_bias = has_bias
        if has_bias:
            self.bias = _uniform((out_channels,), bound, "bias")

    def construct(self, x1, x2):
        # (N, 1, 1, in1) @ (out, in1, in2) -> (N, out, 1, in2), then . x2
        left = ops.matmul(x1.reshape((x1.shape[0], 1, 1, -1)), self.weight)
        y = (left.reshape((x1.shape[0], self.weight.shape[0], -1)) *
             x2.reshape((x2.shape[0], 1, -1))).sum(-1)
        return y + self.bias if self.has_bias else y


class BatchNorm3d(BatchNorm1d):
    """BatchNorm over (N, C, D, H, W)."""


class InstanceNorm3d(InstanceNorm2d):
    """InstanceNorm over (N, C, D, H, W)."""


class Dropout3d(Cell):
    """Zeroes whole channels of (N, C, D, H, W) with probability p in training."""

    def __init__(self, p=0.5):
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"Dropout3d: p must be in [0, 1), got {p}")
        self.p = p

    def construct(self, x):
        if not self.training or self.p == 0:
            return x
        keep = ops.dropout(ops.ones((x.shape[0], x.shape[1], 1, 1, 1)), self.p, True)
        return x * keep.astype(x.dtype)


class AdaptiveAvgPool3d(Cell):
    """Mean over equal blocks of (N, C, D, H, W) (each size divisible by the output's)."""
    _reduce = "mean"

    def __init__(self, output_size):
        super().__init__()
        self.output_size = (output_size,) * 3 if isinstance(output_size, int) else tuple(
            output_size)

    def construct(self, x):
        n, c, *dims = x.shape
        out = [o or s for o, s in zip(self.output_size, dims)]
        if any(s % o for s, o in zip(dims, out)):
            raise ValueError(f"{type(self).__name__}: sizes {tuple(dims)} are not divisible "
                             f"by the output {tuple(out)}")
        shape = [n, c]
        for s, o in zip(dims, out):
            shape += [o, s // o]
        y = x.reshape(tuple(shape))
        if self._reduce == "mean":
            return y.mean((3, 5, 7))
        return y.max(7).max(5).max(3)


class AdaptiveMaxPool3d(AdaptiveAvgPool3d):
    """Max over equal blocks of (N, C, D, H, W)."""
    _reduce = "max"

    def __init__(self, output_size, return_indices=False):
        if return_indices:
            raise ValueError("AdaptiveMaxPool3d: return_indices is not supported")
        super().__init__(output_size)
