"""Loss cells with MindSpore's names and defaults (mindspore.nn). The built-in ones compute in
C++; Model uses their C++ loss directly. A loss written in Python subclasses LossBase and
defines construct(logits, labels)."""

from zenith import _zenith as _C
from zenith.nn.cell import Cell

__all__ = ["LossBase", "SoftmaxCrossEntropyWithLogits", "CrossEntropyLoss", "MSELoss", "L1Loss",
           "MAELoss", "BCEWithLogitsLoss"]


def _check_reduction(reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


class LossBase(Cell):
    """The base of losses: reduction is 'mean', 'sum' or 'none'."""

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = _check_reduction(reduction)

    def get_loss(self, x, weights=1.0):
        """x reduced by self.reduction (after multiplying by weights)."""
        if not (isinstance(weights, float) and weights == 1.0):
            x = x * weights
        if self.reduction == "mean":
            return x.mean()
        if self.reduction == "sum":
            return x.sum()
        return x


class _CppLoss(LossBase):
    """A loss computed by a C++ LossCell (self._loss)."""

    def construct(self, logits, labels):
        return self._loss._forward(logits, labels)


class SoftmaxCrossEntropyWithLogits(_CppLoss):
    """Softmax cross entropy of logits [N, C] (mindspore.nn.SoftmaxCrossEntropyWithLogits).

    sparse=True: labels are class indices [N] (int32 or int64); else probabilities [N, C].
    reduction defaults to 'none' as in MindSpore (per-sample losses); Model needs 'mean' or
    'sum'.
    """

    def __init__(self, sparse=False, reduction="none"):
        super().__init__(reduction)
        self.sparse = bool(sparse)
        self._loss = _C.nn.SoftmaxCrossEntropyWithLogits(self.sparse, reduction, 0.0, -100)


class CrossEntropyLoss(_CppLoss):
    """Cross entropy of logits [N, C] (or [N, C, d...]) against class indices or probabilities
    (mindspore.nn.CrossEntropyLoss): ignore_index, label_smoothing, reduction='mean'."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        if weight is not None:
            raise ValueError("CrossEntropyLoss: class weights are not supported")
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self._loss = _C.nn.CrossEntropyLoss(reduction, ignore_index, float(label_smoothing))


class MSELoss(_CppLoss):
    """Mean squared error (mindspore.nn.MSELoss), reduction='mean'."""

    def __init__(self, reduction="mean"):
        super().__init__(reduction)
        self._loss = _C.nn.MSELoss(reduction)


class L1Loss(LossBase):
    """|logits - labels|, reduced (mindspore.nn.L1Loss)."""

    def construct(self, logits, labels):
        from zenith import ops
        return self.get_loss(ops.abs(logits - labels))


class MAELoss(L1Loss):
    """Mean absolute error |logits - label|, reduced (mindspore.nn.MAELoss)."""


class BCEWithLogitsLoss(LossBase):
    """Sigmoid then binary cross entropy, in one numerically stable step
    (mindspore.nn.BCEWithLogitsLoss): weight scales each element, pos_weight the positive
    term of each class."""

    def __init__(self, reduction="mean", weight=None, pos_weight=None):
        super().__init__(reduction)
        self.weight, self.pos_weight = weight, pos_weight

    def construct(self, logits, labels):
        from zenith import ops
        return ops.binary_cross_entropy_with_logits(logits, labels, self.weight, self.pos_weight,
                                                    self.reduction)
