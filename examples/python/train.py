"""Data-parallel training from Python on the job platform: every rank of a job runs this file
(`entry: python train.py` in job.yaml). communication.init() joins the job's ranks from the
RANK_ID/RANK_SIZE the platform sets; set_auto_parallel_context(parallel_mode="data_parallel")
makes Model wrap the network in DistributedDataParallel; each rank reads its shard of
Fashion-MNIST. Under `zenith server` the loss reaches the dashboard through
ZENITH_METRICS_FILE.

    zenith run examples/python/job.yaml          # or: zenith submit examples/python/job.yaml
"""

import argparse
import os

import zenith
import zenith.dataset as ds
from zenith import nn
from zenith.communication import get_group_size, get_rank, init
from zenith.dataset import vision
from zenith.train import Accuracy, LossMonitor, Model


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--limit", type=int, default=None, help="train on N images in all")
    args = parser.parse_args()

    init()
    rank, size = get_rank(), get_group_size()
    zenith.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True,
                                     device_num=size)
    zenith.set_seed(0)

    def pipeline(usage, training):
        limit = args.limit // size if training and args.limit else None  # per shard
        data = ds.FashionMnistDataset(usage=usage, shuffle=training, num_shards=size,
                                      shard_id=rank, num_samples=limit)
        data = data.map([vision.Rescale(1.0 / 255.0, 0.0), vision.Normalize([0.2860], [0.3530]),
                         vision.HWC2CHW()], "image")
        return data.batch(args.batch_size, drop_remainder=training)

    train, test = pipeline("train", True), pipeline("test", False)
    net = nn.SequentialCell([
        nn.Conv2d(1, 32, 3, pad_mode="valid"), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(32, 64, 3, pad_mode="valid"), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(), nn.Dense(64 * 5 * 5, 10)])
    model = Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                  nn.Momentum(net.trainable_params(), 0.01, 0.9),
                  metrics={"Accuracy": Accuracy()})
    print(f"rank {rank} of {size}: {type(model.train_network).__name__}, "
          f"{train.get_dataset_size()} steps per epoch, metrics file "
          f"{os.environ.get('ZENITH_METRICS_FILE', '-')}", flush=True)
    model.train(args.epochs, train, callbacks=[LossMonitor(per_print_times=50)])
    result = model.eval(test)  # each rank its shard, combined over the ranks
    print(f"rank {rank}: {result}", flush=True)


if __name__ == "__main__":
    main()
