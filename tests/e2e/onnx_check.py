#!/usr/bin/python3
"""Checks an ONNX file from `zenith export` with tools that are not zenith (tests/e2e/onnx_export.sh).

usage: onnx_check.py MODEL.onnx REF_DIR
REF_DIR holds zenith's inputs.npy, outputs.npy and labels.npy (tests/onnx/onnx_reference.cpp).
Debian's onnx (1.12) checks the model and infers every shape strictly; OpenCV's dnn module runs
it on the same inputs; the largest difference from zenith's outputs must be <= 1e-4.
"""
import os
import sys

import cv2
import numpy as np
import onnx

TOLERANCE = 1e-4


def main(model_path, ref_dir):
    name = os.path.basename(model_path)
    model = onnx.load(model_path)
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    assert model.ir_version == 8, model.ir_version
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)], model.opset_import
    ops = sorted({n.op_type for n in model.graph.node})
    assert "BatchNormalization" not in ops, f"{name}: batch norms were not folded: {ops}"
    meta = {p.key: p.value for p in model.metadata_props}

    x = np.load(os.path.join(ref_dir, "inputs.npy"))
    expected = np.load(os.path.join(ref_dir, "outputs.npy"))
    labels = np.load(os.path.join(ref_dir, "labels.npy"))
    net = cv2.dnn.readNetFromONNX(model_path)
    net.setInput(x)
    got = net.forward()
    assert got.shape == expected.shape, f"OpenCV output {got.shape}, zenith {expected.shape}"
    diff = float(np.abs(got - expected).max())
    agree = int((got.argmax(1) == expected.argmax(1)).sum())
    accuracy = float((got.argmax(1) == labels).mean())
    print(f"{name}: onnx {onnx.__version__} checker and strict shape inference passed "
          f"(IR 8, opset 17, {len(model.graph.node)} nodes: {', '.join(ops)}; "
          f"{len(inferred.graph.value_info)} shapes inferred; batch norms folded: "
          f"{meta.get('zenith.batch_norms_folded', '?')}); OpenCV {cv2.__version__} dnn on "
          f"{len(x)} test images: max abs diff {diff:.3g} (<= {TOLERANCE}), argmax agrees "
          f"{agree}/{len(x)}, accuracy {accuracy:.3f}")
    return 0 if diff <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
