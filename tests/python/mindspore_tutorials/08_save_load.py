# Ported from MindSpore's documentation: mindspore-ai/docs, branch r2.3.1, file
# tutorials/source_en/beginner/save_load.md
# Copyright Huawei Technologies Co., Ltd; licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0). The only change: `mindspore` -> `zenith`
# (in the python code blocks, in order, joined into one program). Run by tests/python/test_mindspore_tutorials.py.

import numpy as np
import zenith
from zenith import nn
from zenith import Tensor


def network():
    model = nn.SequentialCell(
                nn.Flatten(),
                nn.Dense(28*28, 512),
                nn.ReLU(),
                nn.Dense(512, 512),
                nn.ReLU(),
                nn.Dense(512, 10))
    return model


model = network()
zenith.save_checkpoint(model, "model.ckpt")


model = network()
param_dict = zenith.load_checkpoint("model.ckpt")
param_not_load, _ = zenith.load_param_into_net(model, param_dict)
print(param_not_load)


zenith.set_context(mode=zenith.GRAPH_MODE, jit_syntax_level=zenith.STRICT)
model = network()
inputs = Tensor(np.ones([1, 1, 28, 28]).astype(np.float32))
zenith.export(model, inputs, file_name="model", file_format="MINDIR")


graph = zenith.load("model.mindir")
model = nn.GraphCell(graph)
outputs = model(inputs)
print(outputs.shape)
