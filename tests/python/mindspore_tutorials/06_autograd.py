# Ported from MindSpore's documentation: mindspore-ai/docs, branch r2.3.1, file
# tutorials/source_en/beginner/autograd.md
# Copyright Huawei Technologies Co., Ltd; licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0). The only change: `mindspore` -> `zenith`
# (in the python code blocks, in order, joined into one program). Run by tests/python/test_mindspore_tutorials.py.

import numpy as np
import zenith
from zenith import nn
from zenith import ops
from zenith import Tensor, Parameter


x = ops.ones(5, zenith.float32)  # input tensor
y = ops.zeros(3, zenith.float32)  # expected output
w = Parameter(Tensor(np.random.randn(5, 3), zenith.float32), name='w') # weight
b = Parameter(Tensor(np.random.randn(3,), zenith.float32), name='b') # bias


def function(x, y, w, b):
    z = ops.matmul(x, w) + b
    loss = ops.binary_cross_entropy_with_logits(z, y, ops.ones_like(z), ops.ones_like(z))
    return loss


loss = function(x, y, w, b)
print(loss)


grad_fn = zenith.grad(function, (2, 3))


grads = grad_fn(x, y, w, b)
print(grads)


def function_with_logits(x, y, w, b):
    z = ops.matmul(x, w) + b
    loss = ops.binary_cross_entropy_with_logits(z, y, ops.ones_like(z), ops.ones_like(z))
    return loss, z


grad_fn = zenith.grad(function_with_logits, (2, 3))
grads = grad_fn(x, y, w, b)
print(grads)


def function_stop_gradient(x, y, w, b):
    z = ops.matmul(x, w) + b
    loss = ops.binary_cross_entropy_with_logits(z, y, ops.ones_like(z), ops.ones_like(z))
    return loss, ops.stop_gradient(z)


grad_fn = zenith.grad(function_stop_gradient, (2, 3))
grads = grad_fn(x, y, w, b)
print(grads)


grad_fn = zenith.grad(function_with_logits, (2, 3), has_aux=True)


grads, (z,) = grad_fn(x, y, w, b)
print(grads, z)


# Define model
class Network(nn.Cell):
    def __init__(self):
        super().__init__()
        self.w = w
        self.b = b

    def construct(self, x):
        z = ops.matmul(x, self.w) + self.b
        return z


# Instantiate model
model = Network()
# Instantiate loss function
loss_fn = nn.BCEWithLogitsLoss()


# Define forward function
def forward_fn(x, y):
    z = model(x)
    loss = loss_fn(z, y)
    return loss


grad_fn = zenith.value_and_grad(forward_fn, None, weights=model.trainable_params())


loss, grads = grad_fn(x, y)
print(grads)
