"""zenith.value_and_grad and zenith.grad: MindSpore 2's scenarios (inputs, weights, both),
has_aux, return_ids, and their errors."""

import numpy as np
import pytest

import zenith
from zenith import Parameter, Tensor, nn, ops


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = Parameter(Tensor(np.array([2.0, -1.0], np.float32)), name="w")

    def construct(self, x, y, z):
        return x * y * z * self.w


def inputs():
    return (Tensor(np.array([1.0, 2.0], np.float32)), Tensor(np.array([-2.0, 3.0], np.float32)),
            Tensor(np.array([0.0, 3.0], np.float32)))


def test_gradient_of_one_input():
    x, y, z = inputs()
    out, g = zenith.value_and_grad(Net(), grad_position=1)(x, y, z)
    np.testing.assert_allclose(out.asnumpy(), [0.0, -18.0])
    np.testing.assert_allclose(g.asnumpy(), (x * z * Tensor([2.0, -1.0])).asnumpy())


def test_gradients_of_several_inputs():
    x, y, z = inputs()
    _, (gx, gz) = zenith.value_and_grad(Net(), grad_position=(0, 2))(x, y, z)
    w = np.array([2.0, -1.0])
    np.testing.assert_allclose(gx.asnumpy(), y.asnumpy() * z.asnumpy() * w)
    np.testing.assert_allclose(gz.asnumpy(), x.asnumpy() * y.asnumpy() * w)


def test_gradients_of_weights_and_of_both():
    net = Net()
    x, y, z = inputs()
    _, (gw,) = zenith.value_and_grad(net, None, net.trainable_params())(x, y, z)
    np.testing.assert_allclose(gw.asnumpy(), (x * y * z).asnumpy())
    _, (gx, (gw2,)) = zenith.value_and_grad(net, 0, net.trainable_params())(x, y, z)
    np.testing.assert_allclose(gw2.asnumpy(), gw.asnumpy())
    np.testing.assert_allclose(gx.asnumpy(), (y * z * net.w).asnumpy())
    # nothing is accumulated into the parameters' .grad
    assert zenith._zenith.autograd.get_grad(net.w) is None


def test_has_aux_differentiates_the_first_output_only():
    def fn(x):
        return (x * x).sum(), x * 10

    x = Tensor(np.array([1.0, 2.0], np.float32))
    (loss, aux), g = zenith.value_and_grad(fn, has_aux=True)(x)
    assert loss.item() == 5.0
    np.testing.assert_allclose(aux.asnumpy(), [10.0, 20.0])
    np.testing.assert_allclose(g.asnumpy(), [2.0, 4.0])
    g2, aux2 = zenith.grad(fn, has_aux=True)(x)
    np.testing.assert_allclose(g2.asnumpy(), [2.0, 4.0])
    assert isinstance(aux2, tuple) and aux2[0].shape == (2,)
    with pytest.raises(ValueError, match="has_aux"):
        zenith.value_and_grad(lambda x: x.sum(), has_aux=True)(x)


def test_several_outputs_differentiate_their_sum():
    x = Tensor(np.array([1.0, 2.0], np.float32))
    out, g = zenith.value_and_grad(lambda x: (x.sum(), (x * 3).sum()))(x)
    assert isinstance(out, tuple)
    np.testing.assert_allclose(g.asnumpy(), [4.0, 4.0])


def test_non_scalar_output_uses_ones():
    x = Tensor(np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_allclose(zenith.grad(lambda x: x * x)(x).asnumpy(), [2.0, 4.0, 6.0])


def test_return_ids_and_unused_inputs():
    net = Net()
    x, y, z = inputs()
    _, (pos_grads, weight_grads) = zenith.value_and_grad(
        net, (0, 1), net.trainable_params(), return_ids=True)(x, y, z)
    assert [p for p, _ in pos_grads] == [0, 1]
    assert weight_grads[0][0] == "w"
    unused = zenith.grad(lambda a, b: (a * 2).sum(), grad_position=(0, 1))
    ga, gb = unused(Tensor([1.0]), Tensor([5.0]))
    assert ga.item() == 2.0 and gb.item() == 0.0  # no dependence: zeros
    const = zenith.grad(lambda a: Tensor([1.0]))(Tensor([1.0]))
    assert const.item() == 0.0


def test_inputs_from_numpy_and_grad_mode_restored():
    g = zenith.grad(lambda a: (a ** 2).sum())(np.array([3.0], np.float32))
    assert g.item() == 6.0
    assert zenith._zenith.autograd.is_grad_enabled()


def test_errors():
    with pytest.raises(ValueError, match="both be None"):
        zenith.value_and_grad(lambda x: x, None, None)
    with pytest.raises(TypeError):
        zenith.value_and_grad(lambda x: x, grad_position="0")
    with pytest.raises(TypeError):
        zenith.value_and_grad(lambda x: x, grad_position=(0, "1"))
    with pytest.raises(TypeError):
        zenith.value_and_grad(lambda x: x, None, weights=[1.0])
    with pytest.raises(TypeError):
        zenith.value_and_grad(3)
    with pytest.raises(ValueError, match="out of range"):
        zenith.grad(lambda x: x.sum(), grad_position=2)(Tensor([1.0]))
    with pytest.raises(TypeError, match="floating"):
        zenith.grad(lambda x: x.sum())(Tensor([1, 2]))
    with pytest.raises(TypeError, match="Tensors"):
        zenith.grad(lambda x: 3.0)(Tensor([1.0]))
    with pytest.raises(KeyError):  # an exception of fn comes through as itself
        zenith.grad(lambda x: {}["missing"])(Tensor([1.0]))


def test_optimizer_step_through_value_and_grad_matches_numpy():
    w0 = np.array([[0.5, -0.25]], np.float32)
    net = nn.Dense(2, 1, weight_init=Tensor(w0), bias_init="zeros")
    opt = nn.SGD(net.trainable_params(), learning_rate=0.1)
    x = Tensor(np.array([[1.0, 2.0]], np.float32))
    loss_fn = lambda x: ops.mse_loss(net(x), Tensor([[1.0]]))
    grad_fn = zenith.value_and_grad(loss_fn, None, opt.parameters)
    loss, grads = grad_fn(x)
    pred = (w0 @ np.array([1.0, 2.0]))[0]
    assert abs(loss.item() - (pred - 1.0) ** 2) < 1e-6
    opt(grads)
    expected = w0 - 0.1 * 2 * (pred - 1.0) * np.array([[1.0, 2.0]])
    np.testing.assert_allclose(net.weight.asnumpy(), expected, rtol=1e-6)
