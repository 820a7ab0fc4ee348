"""MindSpore 2's quickstart on zenith: a Cell subclass, value_and_grad(forward_fn, None,
optimizer.parameters, has_aux=True), optimizer(grads) and create_tuple_iterator(), on
Fashion-MNIST (Debian's dataset-fashion-mnist), then a checkpoint saved, loaded into a new
network and used to predict.

    python3 examples/python/quickstart.py [--epochs 3] [--limit N]
"""

import argparse

import zenith
from zenith import nn
from zenith.dataset import FashionMnistDataset, transforms, vision


def datapipe(dataset, batch_size):
    image_transforms = [
        vision.Rescale(1.0 / 255.0, 0),
        vision.Normalize(mean=(0.2860,), std=(0.3530,)),
        vision.HWC2CHW(),
    ]
    label_transform = transforms.TypeCast(zenith.int32)

    dataset = dataset.map(image_transforms, "image")
    dataset = dataset.map(label_transform, "label")
    dataset = dataset.batch(batch_size)
    return dataset


class Network(nn.Cell):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.dense_relu_sequential = nn.SequentialCell(
            nn.Dense(28 * 28, 512),
            nn.ReLU(),
            nn.Dense(512, 512),
            nn.ReLU(),
            nn.Dense(512, 10),
        )

    def construct(self, x):
        x = self.flatten(x)
        logits = self.dense_relu_sequential(x)
        return logits


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None, help="train on the first N images")
    parser.add_argument("--checkpoint", default="model.ckpt")
    args = parser.parse_args()
    zenith.set_seed(0)

    train_dataset = datapipe(FashionMnistDataset(usage="train", num_samples=args.limit), 64)
    test_dataset = datapipe(FashionMnistDataset(usage="test", shuffle=False), 64)

    for image, label in test_dataset.create_tuple_iterator():
        print(f"Shape of image [N, C, H, W]: {image.shape} {image.dtype}")
        print(f"Shape of label: {label.shape} {label.dtype}")
        break

    model = Network()
    print(model)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = nn.SGD(model.trainable_params(), 1e-2)

    def forward_fn(data, label):
        logits = model(data)
        loss = loss_fn(logits, label)
        return loss, logits

    grad_fn = zenith.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=True)

    def train_step(data, label):
        (loss, _), grads = grad_fn(data, label)
        optimizer(grads)
        return loss

    def train(model, dataset):
        size = dataset.get_dataset_size()
        model.set_train()
        for batch, (data, label) in enumerate(dataset.create_tuple_iterator()):
            loss = train_step(data, label)
            if batch % 100 == 0:
                loss, current = loss.asnumpy(), batch
                print(f"loss: {loss:>7f}  [{current:>3d}/{size:>3d}]")

    def test(model, dataset, loss_fn):
        num_batches = dataset.get_dataset_size()
        model.set_train(False)
        total, test_loss, correct = 0, 0, 0
        for data, label in dataset.create_tuple_iterator():
            pred = model(data)
            total += len(data)
            test_loss += loss_fn(pred, label).asnumpy()
            correct += (pred.argmax(1) == label).asnumpy().sum()
        test_loss /= num_batches
        correct /= total
        print(f"Test: \n Accuracy: {(100 * correct):>0.1f}%, Avg loss: {test_loss:>8f} \n")
        return correct

    for t in range(args.epochs):
        print(f"Epoch {t + 1}\n-------------------------------")
        train(model, train_dataset)
        test(model, test_dataset, loss_fn)
    print("Done!")

    zenith.save_checkpoint(model, args.checkpoint)
    print(f"Saved model to {args.checkpoint}")

    model = Network()
    param_dict = zenith.load_checkpoint(args.checkpoint)
    param_not_load, _ = zenith.load_param_into_net(model, param_dict)
    print(param_not_load)

    model.set_train(False)
    for data, label in test_dataset:
        pred = model(data)
        predicted = pred.argmax(1)
        print(f'Predicted: "{predicted[:10]}", Actual: "{label[:10]}"')
        break


if __name__ == "__main__":
    main()
