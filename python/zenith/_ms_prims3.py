"""mindspore.ops primitive classes over _ms_math.py and _ms_scatter.py (P.Sin()(x),
P.ScatterAdd()(param, indices, updates), ...), plus the optimizer-update primitives."""

import numpy as np

from zenith import ops
from zenith._ms_ops import _AttrPrimitive, _np, assign
from zenith._tensor import Tensor, _as_tensor


def _f(name):
    return lambda *a: getattr(ops, name)(*a)


def _scatter_prim(name):
    return lambda var, indices, updates, use_locking=False: getattr(ops, name)(
        var, indices, updates)


def _apply_rms_prop(var, mean_square, moment, learning_rate, grad, decay, momentum, epsilon,
                    use_locking=False):
    """ms = decay ms + (1 - decay) g^2; mom = momentum mom + lr g / sqrt(ms + eps); var -= mom."""
    g = _as_tensor(grad)
    assign(mean_square, mean_square * decay + g * g * (1.0 - decay))
    assign(moment, moment * momentum + g * _as_tensor(learning_rate) / ops.sqrt(
        mean_square + epsilon))
    return assign(var, var - moment)


def _apply_centered_rms_prop(var, mean_grad, mean_square, moment, grad, learning_rate, decay,
                             momentum, epsilon, use_locking=False):
    g = _as_tensor(grad)
    assign(mean_grad, mean_grad * decay + g * (1.0 - decay))
    assign(mean_square, mean_square * decay + g * g * (1.0 - decay))
    assign(moment, moment * momentum + g * _as_tensor(learning_rate) / ops.sqrt(
        mean_square - mean_grad * mean_grad + epsilon))
    return assign(var, var - moment)


def _apply_ada_max(var, m, v, beta1_power, lr, beta1, beta2, epsilon, grad, use_locking=False):
    g = _as_tensor(grad)
    assign(m, m * beta1 + g * (1.0 - _as_tensor(beta1)))
    assign(v, ops.maximum(v * beta2, ops.abs(g)))
    return assign(var, var - m * (_as_tensor(lr) / (1.0 - _as_tensor(beta1_power))) /
                  (v + epsilon)), m, v


def _apply_adadelta(var, accum, accum_update, lr, rho, epsilon, grad, use_locking=False):
    g = _as_tensor(grad)
    assign(accum, accum * rho + g * g * (1.0 - _as_tensor(rho)))
    update = ops.sqrt(accum_update + epsilon) / ops.sqrt(accum + epsilon) * g
    assign(accum_update, accum_update * rho + update * update * (1.0 - _as_tensor(rho)))
    return assign(var, var - update * _as_tensor(lr)), accum, accum_update


def _apply_adagrad_v2(var, accum, lr, grad, epsilon, update_slots=True, use_locking=False):
    g = _as_tensor(grad)
    if update_slots:
        assign(accum, accum + g * g)
    return assign(var, var - g * _as_tensor(lr) / (ops.sqrt(accum) + epsilon)), accum


def _apply_sign(base_of):
    def run(var, m, lr, alpha, sign_decay, beta, grad):
        g = _as_tensor(grad)
        assign(m, m * beta + g * (1.0 - _as_tensor(beta)))
        agree = ops.sign(g) * ops.sign(m) * _as_tensor(sign_decay)
        return assign(var, var - base_of(alpha, agree) * g * _as_tensor(lr)), m
    return run


def _apply_proximal_gd(var, alpha, l1, l2, delta):
    prox = var - _as_tensor(delta) * _as_tensor(alpha)
    shrunk = ops.sign(prox) * ops.relu(ops.abs(prox) - _as_tensor(alpha) * l1)
    return assign(var, shrunk / (1.0 + _as_tensor(alpha) * l2))


def _sgd(parameters, gradient, learning_rate, accum, momentum, stat, dampening=0.0,
         weight_decay=0.0, nesterov=False):
    """torch.optim.SGD's step with MindSpore's stat (1 before the first step)."""
    g = _as_tensor(gradient) + parameters * weight_decay
    first = float(_np(stat).reshape(-1)[0]) > 0
    assign(accum, g if first else accum * momentum + g * (1.0 - dampening))
    assign(stat, ops.zeros_like(stat))
    step = g + accum * momentum if nesterov else accum
    return assign(parameters, parameters - step * _as_tensor(learning_rate))


def _square_sum_all(x, y):
    return ops.sum(_as_tensor(x) * x), ops.sum(_as_tensor(y) * y)


def _histogram(x, range, nbins=100, dtype="int32"):
    lo, hi = _np(range).astype(np.float64)
    a = np.clip(((_np(x) - lo) / (hi - lo) * nbins).astype(np.int64), 0, nbins - 1)
    return Tensor(np.bincount(a.reshape(-1), minlength=nbins).astype(np.int32))


def _data_format_dim_map(x, src_format="NHWC", dst_format="NCHW"):
    a = _np(x) % 4
    table = np.array([dst_format.index(c) for c in src_format], np.int32)
    return Tensor(table[a])


def _split_v(x, size_splits, split_dim, num_split):
    bounds = np.cumsum(size_splits)[:-1]
    x = _as_tensor(x)
    edges = [0, *bounds, x.shape[split_dim]]
    return tuple(ops.narrow(x, split_dim, int(a), int(b - a)) for a, b in zip(edges, edges[1:]))


def _einsum(inputs, equation):
    return Tensor(np.einsum(equation, *[_np(t) for t in inputs]))


PRIMS = {
    "Sin": _f("sin"), "Cos": _f("cos"), "Tan": _f("tan"), "Asin": _f("asin"),
    "ACos": _f("acos"), "Atan": _f("atan"), "Atan2": _f("atan2"), "Erfinv": _f("erfinv"),
    "BesselI0e": _f("bessel_i0e"), "BesselI1e": _f("bessel_i1e"),
    "Conj": lambda x: _as_tensor(x), "Real": lambda x: _as_tensor(x),
    "Imag": lambda x: ops.zeros_like(_as_tensor(x)),
    "SquareSumAll": _square_sum_all,
    "ReduceProd": lambda x, axis=(), keep_dims=False: ops.prod(x, axis, keep_dims),
    "CumProd": lambda x, axis, exclusive=False, reverse=False: ops.cumprod(x, axis),
    "SameTypeShape": _f("same_type_shape"),
    "MatrixInverse": lambda x, adjoint=False: ops.matrix_inverse(x, adjoint),
    "Eps": lambda x: ops.fill(_as_tensor(x).dtype, _as_tensor(x).shape, float(
        np.finfo(_np(x).dtype).tiny)),
    "Gamma": lambda shape, alpha, beta, seed=0, seed2=0: ops.gamma(shape, alpha, beta, seed),
    "Poisson": lambda shape, mean, seed=0, seed2=0: ops.random_poisson(shape, mean, seed),
    "Multinomial": lambda x, num_samples, seed=0, seed2=0: ops.multinomial(x, num_samples,
                                                                           True, seed),
    "RandomCategorical": lambda logits, num_sample, seed=0, dtype=None: ops.random_categorical(
        logits, num_sample, seed),
    "RandomChoiceWithMask": lambda x, count=256, seed=0, seed2=0: ops.choice_with_mask(
        x, count, seed),
    "Randperm": lambda n, max_length=1, pad=-1, dtype=None: ops.randperm(n),
    "StandardLaplace": lambda shape, seed=0, seed2=0: ops.standard_laplace(shape, seed),
    "UniformInt": lambda shape, minval, maxval, seed=0, seed2=0: ops.uniform_int(
        shape, minval, maxval, seed),
    "SpaceToDepth": lambda x, block_size: ops.space_to_depth(x, block_size),
    "DepthToSpace": lambda x, block_size: ops.depth_to_space(x, block_size),
    "SpaceToBatchND": lambda x, block_shape, paddings: ops.space_to_batch_nd(
        x, block_shape, paddings),
    "SpaceToBatch": lambda x, block_size, paddings: ops.space_to_batch_nd(
        x, block_size, paddings),
    "BatchToSpaceND": lambda x, block_shape, crops: ops.batch_to_space_nd(x, block_shape, crops),
    "BatchToSpace": lambda x, block_size, crops: ops.batch_to_space_nd(x, block_size, crops),
    "DataFormatDimMap": _data_format_dim_map,
    "HistogramFixedWidth": _histogram,
    "IndexAdd": lambda x, indices, y, axis, use_lock=True, check_index_bound=True:
        ops.index_add(x, indices, y, axis),
    "InplaceAdd": lambda x, v, indices: ops.inplace_add(x, v, indices),
    "InplaceSub": lambda x, v, indices: ops.inplace_sub(x, v, indices),
    "InplaceUpdate": lambda x, v, indices: ops.inplace_update(x, v, indices),
    "PopulationCount": _f("population_count"),
    "ReverseSequence": lambda x, seq_lengths, seq_dim, batch_dim=0: ops.reverse_sequence(
        x, seq_lengths, seq_dim, batch_dim),
    "ScatterNd": _f("scatter_nd"),
    "SplitV": _split_v,
    "StridedSlice": lambda x, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0,
        new_axis_mask=0, shrink_axis_mask=0: ops.strided_slice(
            x, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
            shrink_axis_mask),
    "TensorScatterAdd": _f("tensor_scatter_add"), "TensorScatterSub": _f("tensor_scatter_sub"),
    "TensorScatterMax": _f("tensor_scatter_max"), "TensorScatterMin": _f("tensor_scatter_min"),
    "TensorScatterMul": _f("tensor_scatter_mul"), "TensorScatterDiv": _f("tensor_scatter_div"),
    "TensorScatterUpdate": _f("tensor_scatter_update"),
    "UniqueWithPad": _f("unique_with_pad"),
    "UnsortedSegmentMax": _f("unsorted_segment_max"),
    "UnsortedSegmentMin": _f("unsorted_segment_min"),
    "UnsortedSegmentProd": _f("unsorted_segment_prod"),
    "ScatterAdd": _scatter_prim("scatter_add"), "ScatterSub": _scatter_prim("scatter_sub"),
    "ScatterMul": _scatter_prim("scatter_mul"), "ScatterDiv": _scatter_prim("scatter_div"),
    "ScatterMax": _scatter_prim("scatter_max"), "ScatterMin": _scatter_prim("scatter_min"),
    "ScatterUpdate": _scatter_prim("scatter_update"),
    "ScatterNonAliasingAdd": _scatter_prim("scatter_nd_add"),
    "ScatterNdAdd": _scatter_prim("scatter_nd_add"),
    "ScatterNdSub": _scatter_prim("scatter_nd_sub"),
    "ScatterNdUpdate": _scatter_prim("scatter_nd_update"),
    "Einsum": _einsum,
    "ApplyRMSProp": _apply_rms_prop,
    "ApplyCenteredRMSProp": _apply_centered_rms_prop,
    "ApplyAdaMax": _apply_ada_max,
    "ApplyAdadelta": _apply_adadelta,
    "ApplyAdagradV2": _apply_adagrad_v2,
    "ApplyAddSign": _apply_sign(lambda alpha, agree: agree + alpha),
    "ApplyPowerSign": _apply_sign(lambda logbase, agree: ops.exp(agree * logbase)),
    "ApplyProximalGradientDescent": _apply_proximal_gd,
    "SGD": _sgd,
}


def install():
    from zenith._ms_ops import operations
    for name, fn in PRIMS.items():
        cls = type(name, (_AttrPrimitive,), {"_fn": staticmethod(fn),
                                             "__doc__": f"mindspore.ops.{name}."})
        setattr(operations, name, cls)
        setattr(ops, name, cls)
