"""Image transforms on HWC images (mindspore.dataset.vision), run by C++ on the pipeline's
worker threads. Each can also be called on one image (a numpy array) and returns an array."""

import enum

from zenith import _zenith as _C

__all__ = ["Inter", "Border", "Rescale", "Normalize", "HWC2CHW", "Resize", "RandomCrop",
           "RandomHorizontalFlip", "ToTensor", "Decode"]


class Inter(enum.Enum):
    """Interpolation modes; Resize is bilinear."""
    LINEAR = "linear"
    BILINEAR = "linear"


class Border(enum.Enum):
    """Padding modes; RandomCrop pads with a constant."""
    CONSTANT = "constant"


class _Transform:
    """One or more C++ transforms (self._ops), applied in order."""

    def __init__(self, ops):
        self._ops = list(ops)

    def _cpp_ops(self):
        return self._ops

    def __call__(self, img):
        out = img
        for op in self._ops:
            out = op(out)
        return out.asnumpy()

    def __repr__(self):
        return f"{type(self).__name__}()"


class Rescale(_Transform):
    """x * rescale + shift, as float32."""

    def __init__(self, rescale, shift):
        super().__init__([_C.data.Rescale(float(rescale), float(shift))])


class Normalize(_Transform):
    """(x - mean[c]) / std[c] per channel, as float32 (is_hwc: channels last)."""

    def __init__(self, mean, std, is_hwc=True):
        mean = [mean] if isinstance(mean, (int, float)) else list(mean)
        std = [std] if isinstance(std, (int, float)) else list(std)
        super().__init__([_C.data.Normalize([float(v) for v in mean], [float(v) for v in std],
                                            bool(is_hwc))])


class HWC2CHW(_Transform):
    """[H, W, C] -> [C, H, W]."""

    def __init__(self):
        super().__init__([_C.data.HWC2CHW()])


def _size(size):
    return [size] if isinstance(size, int) else list(size)


class Resize(_Transform):
    """Bilinear resize to size (h, w), or the smaller edge to size (an int), keeping the
    aspect ratio."""

    def __init__(self, size, interpolation=Inter.LINEAR):
        if interpolation not in (Inter.LINEAR, Inter.BILINEAR):
            raise ValueError("Resize: only bilinear interpolation is supported")
        super().__init__([_C.data.Resize(_size(size))])


class RandomCrop(_Transform):
    """Pads each side by padding (fill_value), then crops a random size window."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill_value=0,
                 padding_mode=Border.CONSTANT):
        if pad_if_needed or padding_mode != Border.CONSTANT:
            raise ValueError("RandomCrop: pad_if_needed and non-constant padding are not supported")
        if padding is None:
            padding = 0
        if not isinstance(padding, int):
            sides = set(padding)
            if len(sides) != 1:
                raise ValueError("RandomCrop: padding must be the same on every side")
            padding = sides.pop()
        if not isinstance(fill_value, (int, float)):
            fill_value = fill_value[0]
        size = _size(size)
        super().__init__([_C.data.RandomCrop(size if len(size) == 2 else size * 2, padding,
                                             float(fill_value))])


class RandomHorizontalFlip(_Transform):
    """Mirrors the image left-right with probability prob."""

    def __init__(self, prob=0.5):
        super().__init__([_C.data.RandomHorizontalFlip(float(prob))])


class ToTensor(_Transform):
    """HWC uint8 image -> CHW float32 in [0, 1] (Rescale(1/255) then HWC2CHW)."""

    def __init__(self, output_type=None):
        super().__init__([_C.data.Rescale(1.0 / 255.0, 0.0), _C.data.HWC2CHW()])


class Decode(_Transform):
    """Accepted for MindSpore programs: zenith's image datasets decode when they read."""

    def __init__(self, to_pil=False):
        super().__init__([])

    def __call__(self, img):
        return img
