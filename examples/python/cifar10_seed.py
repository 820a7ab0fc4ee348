"""The seed's CIFAR-10 program, on zenith's Python front end: the MindSpore program with
`mindspore` replaced by `zenith` (and the two pooling layers its network needs restored:
without them Dense(64 * 6 * 6, 10) does not fit a 32x32 input).

    python3 examples/python/cifar10_seed.py                      # ./cifar-10-batches-bin
    python3 examples/python/cifar10_seed.py --data-dir DIR
    python3 examples/python/cifar10_seed.py --dataset fashion-mnist

Like the seed, the CIFAR-10 run trains and evaluates on the whole dataset (all six batch
files). The Fashion-MNIST variant (Debian's dataset-fashion-mnist) trains the 1x28x28 network
on the training set and evaluates on the test set, with zenith train's recipe: images
normalised, Momentum 0.9, batch 64, learning rate 0.01 held for 70% of the steps then decayed
linearly to 0.
"""

import argparse

import zenith as ms
import zenith.dataset as ds
from zenith import nn
from zenith.dataset import vision
from zenith.train import Accuracy, CheckpointConfig, LossMonitor, Model, ModelCheckpoint, \
    TimeMonitor


def network(channels, image_size):
    side = ((image_size - 2) // 2 - 2) // 2  # 32 -> 6, 28 -> 5
    return nn.SequentialCell([
        nn.Conv2d(channels, 32, 3, 1, pad_mode="valid"), nn.ReLU(),
        nn.MaxPool2d(kernel_size=2, stride=2),
        nn.Conv2d(32, 64, 3, 1, pad_mode="valid"), nn.ReLU(),
        nn.MaxPool2d(kernel_size=2, stride=2),
        nn.Flatten(), nn.Dense(64 * side * side, 10),
    ])


def cifar10(args):
    dataset = ds.Cifar10Dataset(args.data_dir or "./cifar-10-batches-bin", num_samples=args.limit)
    dataset = dataset.map([vision.Rescale(1.0 / 255.0, 0.0), vision.HWC2CHW()], "image")
    dataset = dataset.batch(args.batch_size or 32)
    return dataset, dataset, network(3, 32), 0.01


def fashion_mnist(args):
    def pipeline(usage, training):
        data = ds.FashionMnistDataset(args.data_dir, usage=usage, shuffle=training,
                                      num_samples=args.limit if training else None)
        data = data.map([vision.Rescale(1.0 / 255.0, 0.0), vision.Normalize([0.2860], [0.3530]),
                         vision.HWC2CHW()], "image")
        return data.batch(args.batch_size or 64, drop_remainder=training)

    train = pipeline("train", True)
    steps = train.get_dataset_size() * args.epochs
    decay = max(1, steps * 3 // 10)  # the last 30% of the steps
    lr = [0.01 * min(1.0, (steps - i) / decay) for i in range(steps)]
    return train, pipeline("test", False), network(1, 28), lr


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=["cifar10", "fashion-mnist"], default="cifar10")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--limit", type=int, default=None, help="train on the first N images")
    parser.add_argument("--ckpt-dir", default="ckpt")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    ms.set_seed(args.seed)
    make = cifar10 if args.dataset == "cifar10" else fashion_mnist
    train_ds, eval_ds, net, lr = make(args)

    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.trainable_params(), lr, 0.9)
    model = Model(net, loss, opt, metrics={"Accuracy": Accuracy()})
    config = CheckpointConfig(save_checkpoint_steps=0, save_checkpoint_epochs=1,
                              keep_checkpoint_max=1)
    model.train(args.epochs, train_ds,
                callbacks=[LossMonitor(per_print_times=train_ds.get_dataset_size()),
                           TimeMonitor(),
                           ModelCheckpoint(prefix=args.dataset, directory=args.ckpt_dir,
                                           config=config)])
    print(model.eval(eval_ds))


if __name__ == "__main__":
    main()
