#!/usr/bin/python3
"""Writes the small ONNX models tests/exec/test_session.c reads (committed
under tests/exec/data/, so tests never need Python). Deterministic.

    /usr/bin/python3 tests/exec/make_test_models.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def save(model, name):
    model.ir_version = 8
    onnx.save(model, os.path.join(OUT, name))


def add_relu():
    # Y = Relu(X + B), X [N, 3] with a symbolic N
    b = numpy_helper.from_array(np.array([1.0, -2.0, 0.5], np.float32), "B")
    g = helper.make_graph(
        [helper.make_node("Add", ["X", "B"], ["S"], name="add"),
         helper.make_node("Relu", ["S"], ["Y"], name="relu")],
        "add_relu",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 3])],
        [b])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "add_relu.onnx")


def unsupported():
    # two unknown standard ops (one used twice) and one custom-domain op
    g = helper.make_graph(
        [helper.make_node("FooOp", ["X"], ["A"], name="foo1"),
         helper.make_node("FooOp", ["A"], ["B"], name="foo2"),
         helper.make_node("BarOp", ["B"], ["C"], name="bar"),
         helper.make_node("Relu", ["C"], ["D"], name="relu"),
         helper.make_node("Baz", ["D"], ["Y"], name="baz", domain="com.example")],
        "unsupported",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid("com.example", 1)]),
         "unsupported.onnx")


def shape_chain():
    # PyTorch's view pattern: Shape -> Gather -> Unsqueeze -> Concat -> Reshape,
    # X [B, S, 6] -> Y [B, S, 2, 3]; Z = Y transposed to [B, 2, S, 3]
    i0 = numpy_helper.from_array(np.array(0, np.int64), "i0")
    i1 = numpy_helper.from_array(np.array(1, np.int64), "i1")
    ax = numpy_helper.from_array(np.array([0], np.int64), "ax")
    tail = numpy_helper.from_array(np.array([2, 3], np.int64), "tail")
    g = helper.make_graph(
        [helper.make_node("Shape", ["X"], ["shp"], name="shape"),
         helper.make_node("Gather", ["shp", "i0"], ["b"], name="gather_b", axis=0),
         helper.make_node("Gather", ["shp", "i1"], ["s"], name="gather_s", axis=0),
         helper.make_node("Unsqueeze", ["b", "ax"], ["b1"], name="unsq_b"),
         helper.make_node("Unsqueeze", ["s", "ax"], ["s1"], name="unsq_s"),
         helper.make_node("Concat", ["b1", "s1", "tail"], ["target"], name="concat", axis=0),
         helper.make_node("Reshape", ["X", "target"], ["Y"], name="reshape"),
         helper.make_node("Transpose", ["Y"], ["Z"], name="transpose", perm=[0, 2, 1, 3])],
        "shape_chain",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["B", "S", 6])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["B", "S", 2, 3]),
         helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["B", 2, "S", 3])],
        [i0, i1, ax, tail])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "shape_chain.onnx")


def two_inputs():
    # Y = A + B with A [N, 4] and B [N, 4] (same symbolic N), I int64 [2] -> J = I * 2
    two = numpy_helper.from_array(np.array(2, np.int64), "two")
    g = helper.make_graph(
        [helper.make_node("Add", ["A", "B"], ["Y"], name="add"),
         helper.make_node("Mul", ["I", "two"], ["J"], name="mul")],
        "two_inputs",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("B", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("I", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("J", TensorProto.INT64, [2])],
        [two])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "two_inputs.onnx")


def weird_names():
    # an output whose name is not a safe file name
    g = helper.make_graph(
        [helper.make_node("Identity", ["X"], ["../up/y:0"], name="id")],
        "weird_names",
        [helper.make_tensor_value_info("X", TensorProto.INT32, [2])],
        [helper.make_tensor_value_info("../up/y:0", TensorProto.INT32, [2])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "weird_names.onnx")


def variant(name, opset, nodes, inputs, outputs, inits=()):
    """A one-op model at a given opset plus its input/expected .npy files:
    data/variants/NAME.onnx, NAME.in<i>.npy, NAME.out<j>.npy."""
    vdir = os.path.join(OUT, "variants")
    os.makedirs(vdir, exist_ok=True)
    vis = [helper.make_tensor_value_info(n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype],
                                         list(a.shape)) for n, a in inputs]
    vos = [helper.make_tensor_value_info(n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype],
                                         list(a.shape)) for n, a in outputs]
    g = helper.make_graph(nodes, name, vis, vos,
                          [numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, os.path.join(vdir, name + ".onnx"))
    for i, (_, a) in enumerate(inputs):
        np.save(os.path.join(vdir, "%s.in%d.npy" % (name, i)), a)
    for j, (_, a) in enumerate(outputs):
        np.save(os.path.join(vdir, "%s.out%d.npy" % (name, j)), a)


def softmax_ref(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def opset_variants():
    """Per-opset semantics the 1.12 node tests do not cover (they are mostly
    opset 13): attributes that became inputs, and opset 18's num_outputs."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    # ReduceMean-18 / ReduceMax-18: axes is an input
    variant("reducemean18", 18,
            [helper.make_node("ReduceMean", ["X", "axes"], ["Y"], keepdims=0)],
            [("X", x)], [("Y", x.mean(axis=(0, 2)))],
            [("axes", np.array([0, -1], np.int64))])
    variant("reducemax11", 11,
            [helper.make_node("ReduceMax", ["X"], ["Y"], axes=[1])],
            [("X", x)], [("Y", x.max(axis=1, keepdims=True))])
    # Split-18 with num_outputs and an uneven last chunk; Split-11 attribute
    x7 = rng.standard_normal((7, 2)).astype(np.float32)
    variant("split18", 18,
            [helper.make_node("Split", ["X"], ["A", "B", "C"], axis=0, num_outputs=3)],
            [("X", x7)], [("A", x7[0:3]), ("B", x7[3:6]), ("C", x7[6:7])])
    variant("split11", 11,
            [helper.make_node("Split", ["X"], ["A", "B"], axis=0, split=[2, 5])],
            [("X", x7)], [("A", x7[0:2]), ("B", x7[2:7])])
    # Softmax-11 coerces to 2-D at axis; Softmax-13 uses the axis alone
    x2d = x.reshape(2, 12)
    variant("softmax11", 11, [helper.make_node("Softmax", ["X"], ["Y"], axis=1)],
            [("X", x)], [("Y", softmax_ref(x2d, 1).reshape(2, 3, 4))])
    variant("logsoftmax11", 11, [helper.make_node("LogSoftmax", ["X"], ["Y"])],
            [("X", x)], [("Y", np.log(softmax_ref(x2d, 1)).reshape(2, 3, 4))])
    # Clip-6 attributes, Clip-13 inputs (max only)
    variant("clip6", 6, [helper.make_node("Clip", ["X"], ["Y"], min=-0.5, max=0.25)],
            [("X", x)], [("Y", np.clip(x, -0.5, 0.25))])
    variant("clip13", 13, [helper.make_node("Clip", ["X", "", "hi"], ["Y"])],
            [("X", x)], [("Y", np.minimum(x, np.float32(0.1)))],
            [("hi", np.array(0.1, np.float32))])
    # Slice-9 attributes; Squeeze/Unsqueeze-11 attributes
    variant("slice9", 9,
            [helper.make_node("Slice", ["X"], ["Y"], starts=[1, 0], ends=[3, -1], axes=[1, 2])],
            [("X", x)], [("Y", x[:, 1:3, 0:-1])])
    x1 = rng.standard_normal((3, 1, 4)).astype(np.float32)
    variant("squeeze11", 11,
            [helper.make_node("Squeeze", ["X"], ["S"], axes=[1]),
             helper.make_node("Unsqueeze", ["S"], ["Y"], axes=[0, 3])],
            [("X", x1)], [("Y", x1.reshape(1, 3, 4, 1))])
    # Gelu-20 (newer than the 1.12 corpus): exact and tanh forms
    import math
    erf = np.vectorize(math.erf)
    xd = x.astype(np.float64)
    exact = 0.5 * xd * (1 + erf(xd / math.sqrt(2)))
    approx = 0.5 * xd * (1 + np.tanh(math.sqrt(2 / math.pi) * (xd + 0.044715 * xd ** 3)))
    variant("gelu20", 20,
            [helper.make_node("Gelu", ["X"], ["A"]),
             helper.make_node("Gelu", ["X"], ["B"], approximate="tanh")],
            [("X", x)], [("A", exact.astype(np.float32)), ("B", approx.astype(np.float32))])
    # Range / ConstantOfShape / Expand / Tile driven by constant inputs
    variant("range_expand_tile", 17,
            [helper.make_node("Range", ["s", "l", "d"], ["R"]),
             helper.make_node("Shape", ["X"], ["shp"]),
             helper.make_node("ConstantOfShape", ["shp"], ["Z"],
                              value=numpy_helper.from_array(np.array([2.0], np.float32))),
             helper.make_node("Expand", ["R", "eshape"], ["E"]),
             helper.make_node("Tile", ["E", "reps"], ["T"]),
             helper.make_node("Cast", ["T"], ["Tf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["Z", "X"], ["Y"])],
            [("X", x)],
            [("Y", 2 * x),
             ("Tf", np.tile(np.broadcast_to(np.arange(1, 10, 3, dtype=np.int64), (2, 3)),
                            (1, 2)).astype(np.float32))],
            [("s", np.array(1, np.int64)), ("l", np.array(10, np.int64)),
             ("d", np.array(3, np.int64)), ("eshape", np.array([2, 1], np.int64)),
             ("reps", np.array([1, 2], np.int64))])


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    add_relu()
    unsupported()
    shape_chain()
    two_inputs()
    weird_names()
    opset_variants()
