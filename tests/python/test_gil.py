"""The GIL is released while C++ computes: a Python thread keeps running during long ops,
Model.train and data pipelines, and Python code called back from C++ (cells, sources) works
from the C++ threads."""

import threading
import time

import numpy as np

import zenith
import zenith.dataset as ds
from zenith import Tensor, nn, ops


class Counter:
    """Counts in a Python thread while the main thread is in C++."""

    def __init__(self):
        self.count = 0
        self.running = True
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while self.running:
            self.count += 1

    def __enter__(self):
        self.thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *err):
        self.running = False
        self.thread.join()


def during(fn):
    """How far the Python thread counted while fn ran, and fn's wall time."""
    with Counter() as c:
        start_count = c.count
        start = time.perf_counter()
        fn()
        seconds = time.perf_counter() - start
        counted = c.count - start_count
    return counted, seconds


def test_a_python_thread_runs_during_a_long_op():
    a = Tensor(np.random.default_rng(0).normal(size=(1200, 1200)).astype(np.float32))

    def work():
        for _ in range(8):
            ops.matmul(a, a)

    counted, seconds = during(work)
    assert seconds > 0.05
    # With the GIL held the thread could not count at all; free, it counts at full speed
    # (millions per second); 10k per second of the op leaves room for a loaded machine.
    assert counted > 10000 * seconds, (counted, seconds)


def test_a_python_thread_runs_during_model_train():
    images = np.random.default_rng(0).normal(size=(512, 1, 28, 28)).astype(np.float32)
    labels = np.random.default_rng(1).integers(0, 10, 512)
    data = ds.NumpySlicesDataset((images, labels), ["image", "label"]).batch(64)
    net = zenith.models.seed_cnn(1, 28, 10)
    model = zenith.Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.01))
    counted, seconds = during(lambda: model.train(2, data))
    assert counted > 10000 * seconds, (counted, seconds)


def test_python_callbacks_from_cpp_threads_while_another_thread_runs():
    calls = []

    def source_item(i):
        calls.append(threading.get_ident())
        return np.full((2,), i, np.float32)

    class Source:
        def __len__(self):
            return 200

        def __getitem__(self, i):
            return source_item(i)

    data = ds.GeneratorDataset(Source(), ["x"], shuffle=False, num_parallel_workers=2)
    data = data.map(lambda a: a + 1, "x").batch(10)
    with Counter() as c:
        values = [x.asnumpy()[:, 0].tolist() for (x,) in data.create_tuple_iterator()]
    assert values[3] == [31.0 + i for i in range(10)]
    assert threading.get_ident() not in set(calls)  # called on the pipeline's threads
    assert c.count > 0


def test_two_python_threads_train_at_once():
    errors = []

    def train(seed):
        try:
            rng = np.random.default_rng(seed)
            data = ds.NumpySlicesDataset((rng.normal(size=(128, 4)).astype(np.float32),
                                          rng.integers(0, 2, 128)), ["x", "y"]).batch(16)
            net = nn.Dense(4, 2)
            zenith.Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.1)).train(
                3, data)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=train, args=(s,)) for s in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
