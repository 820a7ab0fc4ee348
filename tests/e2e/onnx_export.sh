#!/bin/bash
# ONNX export checked by two tools that are not zenith, on real Fashion-MNIST test images. For
# seedcnn, lenet and resnet18, each trained briefly (so resnet18's batch norms hold real running
# statistics before they are folded), `zenith export` writes the .onnx file; Debian's
# python3-onnx checks it (onnx.checker full check, strict shape inference) and OpenCV's dnn
# module (python3-opencv) runs it on 256 test images, whose outputs must equal zenith's
# (tests/onnx/onnx_reference.cpp) to 1e-4 (onnx_check.py). CIFAR-10's format too: its binary
# batches where CIFAR10_DIR names them, else batches in that format made here. $1 is the zenith
# binary; ZENITH_ONNX_REFERENCE the helper (set by CTest).
set -u
ZENITH=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../support/e2e_work.bash"
e2e_work onnx
fail() {
  echo "FAIL: $*"
  exit 1
}
[ -x "${ZENITH_ONNX_REFERENCE:-}" ] || fail "ZENITH_ONNX_REFERENCE does not name the onnx_reference helper"
/usr/bin/python3 -c "import onnx, cv2, numpy" ||
  fail "needs Debian's python3-onnx, python3-opencv and python3-numpy"
[ -d /usr/share/datasets/fashion-mnist ] || fail "Fashion-MNIST missing (apt-get install dataset-fashion-mnist)"

# check MODEL DATASET TRAIN_SAMPLES [train flags...]
check() {
  local model=$1 dataset=$2 limit=$3 run="$work/$1-$2"
  shift 3
  "$ZENITH" train --model "$model" --dataset "$dataset" --epochs 1 --limit-train "$limit" \
    --limit-test 64 --batch-size 32 --progress none --out "$run" "$@" > "$run.train.log" 2>&1 ||
    fail "train $model: $(tail -5 "$run.train.log")"
  "$ZENITH" export --checkpoint "$run/checkpoint_epoch_1.safetensors" --format onnx \
    --out "$run.onnx" || fail "export $model on $dataset"
  "$ZENITH_ONNX_REFERENCE" "$run/checkpoint_epoch_1.safetensors" 256 "$run.ref" ||
    fail "zenith's reference outputs of $model"
  /usr/bin/python3 "$here/onnx_check.py" "$run.onnx" "$run.ref" || fail "$model on $dataset"
}
check seedcnn fashion-mnist 2048
check lenet fashion-mnist 2048
check resnet18 fashion-mnist 256
# CIFAR-10's 3x32x32 path: its binary batches where CIFAR10_DIR names them, else batches in its
# format made from Fashion-MNIST images (padded to 32x32, grey in all three channels), since no
# CIFAR-10 download is possible here.
cifar=${CIFAR10_DIR:-}
if [ -z "$cifar" ]; then
  cifar="$work/cifar10-from-fashion-mnist"
  /usr/bin/python3 - "$cifar" <<'PY' || fail "cannot write CIFAR-10-format batches"
import gzip, os, sys
import numpy as np
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
src = "/usr/share/datasets/fashion-mnist/"
def read(prefix, n):
    with gzip.open(src + prefix + "-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16)[: n * 784].reshape(n, 28, 28)
    with gzip.open(src + prefix + "-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    padded = np.pad(images, ((0, 0), (2, 2), (2, 2)))
    chw = np.repeat(padded[:, None], 3, axis=1).reshape(n, 3072)
    return np.concatenate([labels[:, None], chw], axis=1)  # records: label byte + CHW bytes
train, test = read("train", 320), read("t10k", 256)
for i in range(5):
    train[i * 64:(i + 1) * 64].tofile(os.path.join(out, f"data_batch_{i + 1}.bin"))
test.tofile(os.path.join(out, "test_batch.bin"))
PY
  echo "CIFAR-10: CIFAR10_DIR unset; checking on CIFAR-10-format batches of Fashion-MNIST images"
fi
check resnet18 cifar10 256 --data-dir "$cifar"
echo "onnx_export: all checks passed"
