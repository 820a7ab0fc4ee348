"""mindspore.nn recurrent layers, Conv1d, BiDense and the 3-d norm/dropout/pooling cells
(zenith/nn/recurrent.py) against PyTorch with the same weights: outputs and input gradients."""

import numpy as np
import pytest
import torch

import zenith
from zenith import Tensor, nn

RNG = np.random.default_rng(7)


def close(z, ref, tol=1e-5):
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    np.testing.assert_allclose(z.asnumpy(), ref, rtol=tol, atol=tol)


def same_weights(cell, module):
    for name, p in module.named_parameters():
        getattr(cell, name).set_data(Tensor(p.detach().numpy()))


def check(cell, module, *inputs, pick=lambda out: out):
    """Forward equal and d(sum of output)/d(first input) equal."""
    same_weights(cell, module)
    xt = [torch.tensor(a, requires_grad=True) for a in inputs]
    want = pick(module(*xt))
    close(pick(cell(*[Tensor(a) for a in inputs])), want)
    want.sum().backward()
    rest = [Tensor(a) for a in inputs[1:]]
    close(zenith.grad(lambda a: pick(cell(a, *rest)).sum())(Tensor(inputs[0])), xt[0].grad)


def seq(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("layers,bidirectional,batch_first", [(1, False, False),
                                                              (2, True, True)])
def test_recurrent_layers_match_torch(kind, layers, bidirectional, batch_first):
    cell = getattr(nn, kind)(3, 4, num_layers=layers, bidirectional=bidirectional,
                             batch_first=batch_first)
    module = getattr(torch.nn, kind)(3, 4, num_layers=layers, bidirectional=bidirectional,
                                     batch_first=batch_first)
    x = seq(2, 5, 3) if batch_first else seq(5, 2, 3)
    check(cell, module, x, pick=lambda out: out[0])
    finals = cell(Tensor(x))[1]
    want = module(torch.tensor(x))[1]
    if kind == "LSTM":
        close(finals[1], want[1])
    else:
        close(finals, want)


def test_recurrent_cells_match_torch():
    x, h = seq(2, 3), seq(2, 4)
    check(nn.RNNCell(3, 4), torch.nn.RNNCell(3, 4), x, h)
    check(nn.GRUCell(3, 4), torch.nn.GRUCell(3, 4), x, h)
    c = seq(2, 4)
    lstm, ref = nn.LSTMCell(3, 4), torch.nn.LSTMCell(3, 4)
    same_weights(lstm, ref)
    hy, cy = lstm(Tensor(x), (Tensor(h), Tensor(c)))
    th, tc = ref(torch.tensor(x), (torch.tensor(h), torch.tensor(c)))
    close(hy, th)
    close(cy, tc)


@pytest.mark.parametrize("kw,torch_kw", [
    (dict(pad_mode="same"), dict(padding="same")),
    (dict(pad_mode="valid", stride=2, dilation=2), dict(stride=2, dilation=2)),
    (dict(pad_mode="pad", padding=2, stride=3), dict(padding=2, stride=3)),
])
def test_conv1d_matches_torch(kw, torch_kw):
    check(nn.Conv1d(3, 5, 3, has_bias=True, **kw), torch.nn.Conv1d(3, 5, 3, **torch_kw),
          seq(2, 3, 9))


def test_bidense_and_3d_cells_match_torch():
    check(nn.BiDense(3, 4, 5), torch.nn.Bilinear(3, 4, 5), seq(2, 3), seq(2, 4))
    x = seq(2, 3, 4, 4, 6)
    close(nn.BatchNorm3d(3)(Tensor(x)), torch.nn.BatchNorm3d(3)(torch.tensor(x)), 1e-4)
    close(nn.InstanceNorm3d(3)(Tensor(x)), torch.nn.InstanceNorm3d(3)(torch.tensor(x)), 1e-4)
    close(nn.AdaptiveAvgPool3d((2, 1, 3))(Tensor(x)),
          torch.nn.AdaptiveAvgPool3d((2, 1, 3))(torch.tensor(x)))
    close(nn.AdaptiveMaxPool3d(2)(Tensor(x)), torch.nn.AdaptiveMaxPool3d(2)(torch.tensor(x)))
    drop = nn.Dropout3d(0.5)
    drop.set_train(True)
    out = drop(Tensor(np.ones((4, 8, 2, 2, 2), np.float32))).asnumpy()
    per_channel = out.reshape(32, 8)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(1) == per_channel.max(1)).all()  # whole channels kept or dropped
    drop.set_train(False)
    close(drop(Tensor(x)), x)
