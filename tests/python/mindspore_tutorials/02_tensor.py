# Ported from MindSpore's documentation: mindspore-ai/docs, branch r2.3.1, file
# tutorials/source_en/beginner/tensor.md
# Copyright Huawei Technologies Co., Ltd; licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0). The only change: `mindspore` -> `zenith`
# (in the python code blocks, in order, joined into one program). Run by tests/python/test_mindspore_tutorials.py.

import numpy as np
import zenith
from zenith import ops
from zenith import Tensor, CSRTensor, COOTensor


data = [1, 0, 1, 0]
x_data = Tensor(data)
print(x_data, x_data.shape, x_data.dtype)


np_array = np.array(data)
x_np = Tensor(np_array)
print(x_np, x_np.shape, x_np.dtype)


from zenith.common.initializer import One, Normal

# Initialize a tensor with ones
tensor1 = zenith.Tensor(shape=(2, 2), dtype=zenith.float32, init=One())
# Initialize a tensor from normal distribution
tensor2 = zenith.Tensor(shape=(2, 2), dtype=zenith.float32, init=Normal())

print("tensor1:\n", tensor1)
print("tensor2:\n", tensor2)


from zenith import ops

x_ones = ops.ones_like(x_data)
print(f"Ones Tensor: \n {x_ones} \n")

x_zeros = ops.zeros_like(x_data)
print(f"Zeros Tensor: \n {x_zeros} \n")


x = Tensor(np.array([[1, 2], [3, 4]]), zenith.int32)

print("x_shape:", x.shape)
print("x_dtype:", x.dtype)
print("x_itemsize:", x.itemsize)
print("x_nbytes:", x.nbytes)
print("x_ndim:", x.ndim)
print("x_size:", x.size)
print("x_strides:", x.strides)


tensor = Tensor(np.array([[0, 1], [2, 3]]).astype(np.float32))

print("First row: {}".format(tensor[0]))
print("value of bottom right corner: {}".format(tensor[1, 1]))
print("Last column: {}".format(tensor[:, -1]))
print("First column: {}".format(tensor[..., 0]))


x = Tensor(np.array([1, 2, 3]), zenith.float32)
y = Tensor(np.array([4, 5, 6]), zenith.float32)

output_add = x + y
output_sub = x - y
output_mul = x * y
output_div = y / x
output_mod = y % x
output_floordiv = y // x

print("add:", output_add)
print("sub:", output_sub)
print("mul:", output_mul)
print("div:", output_div)
print("mod:", output_mod)
print("floordiv:", output_floordiv)


data1 = Tensor(np.array([[0, 1], [2, 3]]).astype(np.float32))
data2 = Tensor(np.array([[4, 5], [6, 7]]).astype(np.float32))
output = ops.concat((data1, data2), axis=0)

print(output)
print("shape:\n", output.shape)


data1 = Tensor(np.array([[0, 1], [2, 3]]).astype(np.float32))
data2 = Tensor(np.array([[4, 5], [6, 7]]).astype(np.float32))
output = ops.stack([data1, data2])

print(output)
print("shape:\n", output.shape)


t = Tensor([1., 1., 1., 1., 1.])
print(f"t: {t}", type(t))
n = t.asnumpy()
print(f"n: {n}", type(n))


n = np.ones(5)
t = Tensor.from_numpy(n)


np.add(n, 1, out=n)
print(f"n: {n}", type(n))
print(f"t: {t}", type(t))


indptr = Tensor([0, 1, 2])
indices = Tensor([0, 1])
values = Tensor([1, 2], dtype=zenith.float32)
shape = (2, 4)

# Make a CSRTensor
csr_tensor = CSRTensor(indptr, indices, values, shape)

print(csr_tensor.astype(zenith.float64).dtype)


indices = Tensor([[0, 1], [1, 2]], dtype=zenith.int32)
values = Tensor([1, 2], dtype=zenith.float32)
shape = (3, 4)

# Make a COOTensor
coo_tensor = COOTensor(indices, values, shape)

print(coo_tensor.values)
print(coo_tensor.indices)
print(coo_tensor.shape)
print(coo_tensor.astype(zenith.float64).dtype)  # COOTensor to float64
