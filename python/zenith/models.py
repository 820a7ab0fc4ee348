"""zenith.models: the model zoo (zenith's addition): the seed's CNN, LeNet-5, ResNet-18,
made in C++."""

from zenith import _zenith as _C
from zenith.nn.cell import _adopt

__all__ = ["seed_cnn", "lenet5", "resnet18", "create", "names"]


def seed_cnn(in_channels=3, image_size=32, num_classes=10):
    """The seed's CIFAR-10 network with its two pooling layers restored: Conv(c, 32, 3, valid)
    ReLU MaxPool(2) Conv(32, 64, 3, valid) ReLU MaxPool(2) Flatten Dense(64 s s, n); image_size
    28 gives the 1x28x28 variant."""
    return _adopt(_C.models.seed_cnn(in_channels, image_size, num_classes))


def lenet5(in_channels=1, image_size=28, num_classes=10):
    """LeNet-5 for 28x28 or 32x32 inputs."""
    return _adopt(_C.models.lenet5(in_channels, image_size, num_classes))


def resnet18(in_channels=3, num_classes=10):
    """ResNet-18 with the CIFAR stem (torchvision parameter names)."""
    return _adopt(_C.models.resnet18(in_channels, num_classes))


def create(name, in_channels, image_size, num_classes):
    """A zoo model by name ('seedcnn', 'lenet', 'resnet18')."""
    return _adopt(_C.models.create(name, in_channels, image_size, num_classes))


def names():
    """The zoo's model names."""
    return list(_C.models.names())
